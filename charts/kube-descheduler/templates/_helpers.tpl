{{/* Name of the chart, or nameOverride. */}}
{{- define "kube-descheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: fullnameOverride, else <release>-<name> (or the release name when it already contains the name).
     Kept at 45 characters so that suffixes such as "-eviction-guard" still fit in 63. */}}
{{- define "kube-descheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kube-descheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "kube-descheduler.labels" -}}
helm.sh/chart: {{ include "kube-descheduler.chart" . }}
app.kubernetes.io/name: {{ include "kube-descheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of the descheduler (engine) pods. */}}
{{- define "kube-descheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-descheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: descheduler
{{- end -}}

{{/* Selector labels of the eviction guard pods. */}}
{{- define "kube-descheduler.webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-descheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: eviction-guard
{{- end -}}

{{- define "kube-descheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kube-descheduler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kube-descheduler.webhook.fullname" -}}
{{- printf "%s-webhook" (include "kube-descheduler.fullname" .) -}}
{{- end -}}

{{- define "kube-descheduler.webhook.serviceAccountName" -}}
{{- if .Values.webhook.serviceAccount.create -}}
{{- default (include "kube-descheduler.webhook.fullname" .) .Values.webhook.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.webhook.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kube-descheduler.webhook.configurationName" -}}
{{- printf "%s-eviction-guard" (include "kube-descheduler.fullname" .) -}}
{{- end -}}

{{- define "kube-descheduler.webhook.secretName" -}}
{{- default (printf "%s-tls" (include "kube-descheduler.webhook.fullname" .)) .Values.webhook.certs.secretName -}}
{{- end -}}

{{- define "kube-descheduler.certs.fullname" -}}
{{- printf "%s-certs" (include "kube-descheduler.fullname" .) -}}
{{- end -}}

{{- define "kube-descheduler.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "kube-descheduler.webhook.image" -}}
{{- $repo := .Values.webhook.image.repository | default .Values.image.repository -}}
{{- $tag := .Values.webhook.image.tag | default .Values.image.tag | default .Chart.AppVersion -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/* Namespace of the leader-election Lease. */}}
{{- define "kube-descheduler.leaseNamespace" -}}
{{- .Values.leaderElection.resourceNamespace | default .Release.Namespace -}}
{{- end -}}

{{/* "true" when metrics are served (metrics.enabled and no disable-metrics in cmdOptions). */}}
{{- define "kube-descheduler.metricsServed" -}}
{{- $disabled := false -}}
{{- if hasKey .Values.cmdOptions "disable-metrics" -}}
{{- $v := get .Values.cmdOptions "disable-metrics" -}}
{{- if or (eq $v nil) (eq (toString $v) "true") -}}{{- $disabled = true -}}{{- end -}}
{{- end -}}
{{- if and .Values.metrics.enabled (not $disabled) -}}true{{- end -}}
{{- end -}}

{{/* "true" when `run` asks for evictions through the EvictionRequest API (cmdOptions eviction-api). */}}
{{- define "kube-descheduler.requestsEvictions" -}}
{{- if eq (toString (get .Values.cmdOptions "eviction-api")) "EvictionRequest" -}}true{{- end -}}
{{- end -}}

{{/* "true" when the secure port authenticates callers (TokenReview + SubjectAccessReview). */}}
{{- define "kube-descheduler.authenticatedServing" -}}
{{- if or .Values.trigger.enabled (include "kube-descheduler.metricsServed" .) -}}true{{- end -}}
{{- end -}}

{{/* Validation that JSON Schema cannot express. */}}
{{- define "kube-descheduler.validate" -}}
{{- if and .Values.leaderElection.enabled (ne .Values.kind "Deployment") -}}
{{- fail (printf "leaderElection.enabled=true needs kind=Deployment (got kind=%s): a CronJob or Job runs one cycle and exits, so there is nothing to elect" .Values.kind) -}}
{{- end -}}
{{- if and (eq .Values.kind "Deployment") (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas=%d needs leaderElection.enabled=true: without it every replica would evict on its own" (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.trigger.enabled (ne .Values.kind "Deployment") -}}
{{- fail (printf "trigger.enabled=true needs kind=Deployment (got kind=%s): the trigger API needs a long-running process" .Values.kind) -}}
{{- end -}}
{{- if and (eq .Values.kind "Deployment") (not .Values.deschedulingInterval) -}}
{{- fail "kind=Deployment needs deschedulingInterval (e.g. 5m)" -}}
{{- end -}}
{{- if and .Values.webhook.enabled .Values.webhook.podDisruptionBudget.enabled (hasKey .Values.webhook.podDisruptionBudget "minAvailable") -}}
{{- if ge (int .Values.webhook.podDisruptionBudget.minAvailable) (int .Values.webhook.replicas) -}}
{{- fail (printf "webhook.podDisruptionBudget.minAvailable=%d with webhook.replicas=%d would block every node drain: run more replicas (>= 2) or lower minAvailable" (int .Values.webhook.podDisruptionBudget.minAvailable) (int .Values.webhook.replicas)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.placement.schedulerConfig .Values.placement.existingConfigMap -}}
{{- fail "placement.schedulerConfig and placement.existingConfigMap are exclusive: set one (the chart renders the first into a ConfigMap, the second names yours)" -}}
{{- end -}}
{{- if and .Values.webhook.enabled .Values.webhook.preStop.enabled (semverCompare "<1.30.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "webhook.preStop.enabled=true uses the preStop sleep action of Kubernetes >= 1.30 (cluster: %s); set webhook.preStop.enabled=false" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the scheduler configuration (placement.*); empty when none. */}}
{{- define "kube-descheduler.schedulerConfigMap" -}}
{{- if .Values.placement.schedulerConfig -}}
{{ include "kube-descheduler.fullname" . }}-scheduler-config
{{- else if .Values.placement.existingConfigMap -}}
{{ .Values.placement.existingConfigMap }}
{{- end -}}
{{- end -}}

{{/* The descheduler pod spec, shared by the CronJob, the Job and the Deployment. */}}
{{- define "kube-descheduler.podSpec" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
serviceAccountName: {{ include "kube-descheduler.serviceAccountName" . }}
{{- if ne .Values.kind "Deployment" }}
restartPolicy: Never
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: descheduler
    image: {{ include "kube-descheduler.image" . | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command:
      {{- toYaml .Values.command | nindent 6 }}
    args:
      - run
      - --policy-config-file=/policy-dir/policy.yaml
      {{- if eq .Values.kind "Deployment" }}
      - {{ printf "--descheduling-interval=%s" (toString .Values.deschedulingInterval) | quote }}
      {{- end }}
      {{- if .Values.leaderElection.enabled }}
      - --leader-elect=true
      - {{ printf "--leader-elect-lease-duration=%s" .Values.leaderElection.leaseDuration | quote }}
      - {{ printf "--leader-elect-renew-deadline=%s" .Values.leaderElection.renewDeadline | quote }}
      - {{ printf "--leader-elect-retry-period=%s" .Values.leaderElection.retryPeriod | quote }}
      - {{ printf "--leader-elect-resource-name=%s" .Values.leaderElection.resourceName | quote }}
      - {{ printf "--leader-elect-resource-namespace=%s" (include "kube-descheduler.leaseNamespace" .) | quote }}
      {{- end }}
      {{- if .Values.trigger.enabled }}
      - --enable-trigger-api
      {{- end }}
      {{- if not .Values.metrics.enabled }}
      - --disable-metrics
      {{- end }}
      {{- if include "kube-descheduler.schedulerConfigMap" . }}
      - --scheduler-config=/scheduler-config-dir/scheduler-config.yaml
      {{- end }}
      {{- range $key, $value := .Values.cmdOptions }}
      {{- if eq $value nil }}
      - {{ printf "--%s" $key | quote }}
      {{- else }}
      - {{ printf "--%s=%s" $key (include "kube-descheduler.flagValue" $value) | quote }}
      {{- end }}
      {{- end }}
    ports:
      - name: https
        containerPort: 10258
        protocol: TCP
    {{- with .Values.livenessProbe }}
    livenessProbe:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.securityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
      - name: policy-volume
        mountPath: /policy-dir
        readOnly: true
      {{- if include "kube-descheduler.schedulerConfigMap" . }}
      - name: scheduler-config
        mountPath: /scheduler-config-dir
        readOnly: true
      {{- end }}
volumes:
  - name: policy-volume
    configMap:
      name: {{ include "kube-descheduler.fullname" . }}
  {{- with include "kube-descheduler.schedulerConfigMap" . }}
  - name: scheduler-config
    configMap:
      name: {{ . }}
      items:
        - key: {{ $.Values.placement.existingConfigMapKey | default "scheduler-config.yaml" | quote }}
          path: scheduler-config.yaml
  {{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod template metadata of the descheduler. */}}
{{- define "kube-descheduler.podMetadata" -}}
labels:
  {{- include "kube-descheduler.selectorLabels" . | nindent 2 }}
  {{- with .Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/policy: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
  {{- if .Values.placement.schedulerConfig }}
  checksum/scheduler-config: {{ include (print $.Template.BasePath "/scheduler-config.yaml") . | sha256sum }}
  {{- end }}
  {{- with .Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/*
A cmdOptions value as a flag value: whole numbers as integers (Helm reads numbers as float64, and
toString would print 2097152 as 2.097152e+06, which no integer flag accepts), the rest as toString.
*/}}
{{- define "kube-descheduler.flagValue" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) -}}{{ int64 . }}{{- else -}}{{ toString . }}{{- end -}}
{{- end -}}

{{/*
The policy as the engine reads it (deschedulerPolicy through `tpl`), as a dict; {} when none.
*/}}
{{- define "kube-descheduler.policyDict" -}}
{{- if .Values.deschedulerPolicy -}}
{{- tpl (toYaml .Values.deschedulerPolicy) . | fromYaml | toJson -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/*
"true" when `run` lists metrics.k8s.io (Needed::KubernetesMetrics in src/apicalls.rs): some
LowNodeUtilization pluginConfig has metricsUtilization with source: KubernetesMetrics or the
deprecated metricsServer: true. The same rule as the policy loader's MetricsNeeds.kubernetes.
*/}}
{{- define "kube-descheduler.usesKubernetesMetrics" -}}
{{- $policy := include "kube-descheduler.policyDict" . | fromJson -}}
{{- $uses := false -}}
{{- range $profile := ($policy.profiles | default list) -}}
{{- range $config := ($profile.pluginConfig | default list) -}}
{{- if and (kindIs "map" $config) (eq (toString $config.name) "LowNodeUtilization") (kindIs "map" $config.args) -}}
{{- $m := $config.args.metricsUtilization -}}
{{- if kindIs "map" $m -}}
{{- if or (eq (toString $m.metricsServer) "true") (eq (toString $m.source) "KubernetesMetrics") -}}
{{- $uses = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $uses -}}true{{- end -}}
{{- end -}}

{{/*
"namespace/name" of the Prometheus token Secret `run` reads (Needed::PrometheusTokenSecret in
src/apicalls.rs), empty when it reads none: some LowNodeUtilization pluginConfig has
metricsUtilization with source: Prometheus, and the metricsProviders Prometheus entry has
prometheus.authToken.secretReference.
*/}}
{{- define "kube-descheduler.prometheusTokenSecret" -}}
{{- $policy := include "kube-descheduler.policyDict" . | fromJson -}}
{{- $queries := false -}}
{{- range $profile := ($policy.profiles | default list) -}}
{{- range $config := ($profile.pluginConfig | default list) -}}
{{- if and (kindIs "map" $config) (eq (toString $config.name) "LowNodeUtilization") (kindIs "map" $config.args) -}}
{{- $m := $config.args.metricsUtilization -}}
{{- if and (kindIs "map" $m) (eq (toString $m.source) "Prometheus") -}}
{{- $queries = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $queries -}}
{{- range $provider := ($policy.metricsProviders | default list) -}}
{{- if and (kindIs "map" $provider) (eq (toString $provider.source) "Prometheus") (kindIs "map" $provider.prometheus) -}}
{{- $token := $provider.prometheus.authToken -}}
{{- if and (kindIs "map" $token) (kindIs "map" $token.secretReference) -}}
{{- $ref := $token.secretReference -}}
{{- if and $ref.namespace $ref.name -}}
{{- printf "%s/%s" (toString $ref.namespace) (toString $ref.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
ConfigMap holding the CA of the API server's webhook client certificate (key ca.crt).
*/}}
{{- define "kube-descheduler.webhook.clientCAConfigMap" -}}
{{- default (printf "%s-client-ca" (include "kube-descheduler.webhook.fullname" .)) .Values.webhook.clientAuth.existingConfigMap -}}
{{- end }}
