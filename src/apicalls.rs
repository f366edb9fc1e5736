//! The single list of Kubernetes API calls each component makes.
//!
//! The Helm chart's RBAC (`charts/kube-descheduler`) is tested against this list
//! (`tests/chart_render.rs`): every call must be allowed for the ServiceAccount of its component,
//! and the chart must not grant much more. **Whoever adds, removes or changes an API call in a
//! component updates [`API_CALLS`] in the same change** — a missing entry means a `403 Forbidden`
//! in a real cluster that no unit test against a fake client will show.
//!
//! One entry is one (component, verb, API group, resource[/subresource]) as RBAC sees it: the
//! API version does not matter (`policy/v1` and `policy/v1beta1` evictions are both
//! `create pods/eviction` in group `""`), and a watch cache (kube-runtime reflector) is `list` +
//! `watch`.

/// A process (or Pod) of ours that talks to the API server with its own ServiceAccount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// `kube-descheduler run`: the descheduling engine (CronJob, Job or Deployment).
    Engine,
    /// `kube-descheduler webhook`: the eviction guard and its rollout-restart actor.
    Guard,
    /// `kube-descheduler certs` in the chart's hook Job: the webhook's serving-certificate Secret
    /// and the `caBundle` of the webhook configuration.
    CertsJob,
    /// `kube-descheduler plan --kubeconfig` (and `kubectl descheduler plan`), run by a person or
    /// a CI job with their own credentials: read-only. Granted by the ClusterRole in
    /// `webhook-config/plan-reader/` (not by the chart: no Pod of ours runs it).
    PlanReader,
}

/// Where the objects of a call live, as RBAC sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A cluster-scoped resource (nodes, priorityclasses, tokenreviews, webhook configurations).
    Cluster,
    /// A namespaced resource in any namespace (needs a ClusterRole + ClusterRoleBinding).
    AllNamespaces,
    /// A namespaced resource in the namespace the component is installed in.
    OwnNamespace,
    /// A namespaced resource in the leader-election namespace
    /// (`--leader-elect-resource-namespace`).
    LeaseNamespace,
    /// The namespace of the policy's Prometheus token Secret
    /// (`metricsProviders[].prometheus.authToken.secretReference.namespace`).
    PrometheusTokenNamespace,
}

/// Which object names a call touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Names {
    /// Any object (collection calls such as `list`/`watch`, `create`, or any name).
    Any,
    /// Only the Lease named by `--leader-elect-resource-name`.
    LeaderElectionLease,
    /// Only the webhook's serving-certificate Secret.
    CertsSecret,
    /// Only our own ValidatingWebhookConfiguration.
    WebhookConfiguration,
    /// Only the policy's Prometheus token Secret
    /// (`metricsProviders[].prometheus.authToken.secretReference.name`).
    PrometheusTokenSecret,
}

/// When a component makes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Needed {
    /// Always.
    Always,
    /// Only with `--leader-elect`.
    LeaderElection,
    /// Only when the secure port authenticates callers: the trigger API
    /// (`--enable-trigger-api`) or `/metrics` (unless `--disable-metrics`).
    AuthenticatedServing,
    /// Only when the policy measures usage with metrics.k8s.io: a LowNodeUtilization
    /// `metricsUtilization` with `source: KubernetesMetrics` (or the deprecated
    /// `metricsServer: true`) — [`MetricsNeeds::kubernetes`](kube_descheduler_engine::usage::MetricsNeeds).
    KubernetesMetrics,
    /// Only when the policy queries Prometheus (a LowNodeUtilization `metricsUtilization` with
    /// `source: Prometheus`) and its `metricsProviders` Prometheus entry names a token Secret
    /// (`prometheus.authToken.secretReference`).
    PrometheusTokenSecret,
    /// Only when the guard responds to Evictions of the EvictionRequest API
    /// (`webhook --eviction-responder`).
    EvictionResponder,
    /// Only when `run` asks for evictions through the EvictionRequest API
    /// (`run --eviction-api EvictionRequest`).
    EvictionRequester,
}

/// One Kubernetes API call as RBAC sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiCall {
    /// Who makes it.
    pub component: Component,
    /// RBAC verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: &'static str,
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource (plural, lower case).
    pub resource: &'static str,
    /// Subresource, e.g. `eviction` for `pods/eviction`.
    pub subresource: Option<&'static str>,
    /// Where the objects live.
    pub scope: Scope,
    /// Which names it touches.
    pub names: Names,
    /// When it is made.
    pub needed: Needed,
    /// Why the component makes it.
    pub why: &'static str,
}

impl ApiCall {
    /// `resource` or `resource/subresource`, as written in an RBAC rule.
    pub fn rbac_resource(&self) -> String {
        match self.subresource {
            Some(sub) => format!("{}/{}", self.resource, sub),
            None => self.resource.to_owned(),
        }
    }
}

/// The RBAC verbs a call may use.
pub const VALID_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

const fn call(
    component: Component,
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: Scope,
    why: &'static str,
) -> ApiCall {
    ApiCall {
        component,
        verb,
        group,
        resource,
        subresource: None,
        scope,
        names: Names::Any,
        needed: Needed::Always,
        why,
    }
}

const fn named(mut c: ApiCall, names: Names) -> ApiCall {
    c.names = names;
    c
}

const fn when(mut c: ApiCall, needed: Needed) -> ApiCall {
    c.needed = needed;
    c
}

const fn sub(mut c: ApiCall, subresource: &'static str) -> ApiCall {
    c.subresource = Some(subresource);
    c
}

/// A call of `run --eviction-api EvictionRequest` on `lifecycle.k8s.io` `evictionrequests`.
const fn requester(verb: &'static str, why: &'static str) -> ApiCall {
    when(
        call(
            Engine,
            verb,
            "lifecycle.k8s.io",
            "evictionrequests",
            AllNamespaces,
            why,
        ),
        Needed::EvictionRequester,
    )
}

/// A call of the guard's EvictionRequest responder on `lifecycle.k8s.io` `evictions`.
const fn responder(verb: &'static str, why: &'static str) -> ApiCall {
    when(
        call(
            Guard,
            verb,
            "lifecycle.k8s.io",
            "evictions",
            AllNamespaces,
            why,
        ),
        Needed::EvictionResponder,
    )
}

use Component::{CertsJob, Engine, Guard, PlanReader};
use Scope::{AllNamespaces, Cluster, LeaseNamespace, OwnNamespace, PrometheusTokenNamespace};

const CACHE: &str = "watch cache (reflector) the cycle's snapshot is built from";
const PLAN_LIST: &str = "read once (paged list) into the snapshot `plan` decides on";
const PLAN_METRICS: &str = "measured usage for metricsUtilization (without --metrics FILE)";
const PLAN_STREAM: &str = "read once as a streaming list (WatchList, a watch that ends at its initial-events bookmark); without it, a paged list";

/// The kinds in the cluster state that `run` watches and `plan --kubeconfig` reads once
/// (`cluster::kinds`): (API group, resource, scope).
const CLUSTER_KINDS: &[(&str, &str, Scope)] = &[
    ("", "nodes", Cluster),
    ("", "pods", AllNamespaces),
    ("", "namespaces", Cluster),
    ("policy", "poddisruptionbudgets", AllNamespaces),
    ("scheduling.k8s.io", "priorityclasses", Cluster),
    ("", "persistentvolumeclaims", AllNamespaces),
    ("apps", "replicasets", AllNamespaces),
    ("apps", "deployments", AllNamespaces),
    ("apps", "statefulsets", AllNamespaces),
    ("batch", "jobs", AllNamespaces),
    ("autoscaling", "horizontalpodautoscalers", AllNamespaces),
];

/// `list` and `watch` of every cluster kind, for `component`.
fn cluster_reads(
    component: Component,
    list_why: &'static str,
    watch_why: &'static str,
) -> Vec<ApiCall> {
    CLUSTER_KINDS
        .iter()
        .flat_map(|&(group, resource, scope)| {
            [
                call(component, "list", group, resource, scope, list_why),
                call(component, "watch", group, resource, scope, watch_why),
            ]
        })
        .collect()
}

/// The engine's calls other than its cluster reads.
const ENGINE_CALLS: &[ApiCall] = &[
    sub(
        call(
            Engine,
            "create",
            "",
            "pods",
            AllNamespaces,
            "evict a pod (policy/v1 Eviction, v1beta1 fallback)",
        ),
        "eviction",
    ),
    requester(
        "list",
        "EvictionRequest requester: its outstanding requests (at start and before each cycle)",
    ),
    requester(
        "create",
        "EvictionRequest requester: one request per pod it evicts",
    ),
    requester(
        "get",
        "EvictionRequest requester: the existing request of the same name",
    ),
    requester(
        "patch",
        "EvictionRequest requester: intent Withdrawn, or Eviction again",
    ),
    call(
        Engine,
        "create",
        "",
        "events",
        AllNamespaces,
        "Descheduled / EvictionFailed events (core/v1)",
    ),
    call(
        Engine,
        "patch",
        "",
        "events",
        AllNamespaces,
        "series count of a repeated core/v1 event",
    ),
    call(
        Engine,
        "create",
        "events.k8s.io",
        "events",
        AllNamespaces,
        "Descheduled / EvictionFailed events",
    ),
    call(
        Engine,
        "patch",
        "events.k8s.io",
        "events",
        AllNamespaces,
        "series count of a repeated event",
    ),
    named(
        when(
            call(
                Engine,
                "get",
                "coordination.k8s.io",
                "leases",
                LeaseNamespace,
                "read the leader-election Lease",
            ),
            Needed::LeaderElection,
        ),
        Names::LeaderElectionLease,
    ),
    when(
        call(
            Engine,
            "create",
            "coordination.k8s.io",
            "leases",
            LeaseNamespace,
            "create the Lease the first time",
        ),
        Needed::LeaderElection,
    ),
    named(
        when(
            call(
                Engine,
                "update",
                "coordination.k8s.io",
                "leases",
                LeaseNamespace,
                "acquire / renew / release the Lease (resourceVersion compare-and-set)",
            ),
            Needed::LeaderElection,
        ),
        Names::LeaderElectionLease,
    ),
    when(
        call(
            Engine,
            "create",
            "authentication.k8s.io",
            "tokenreviews",
            Cluster,
            "authenticate bearer tokens on the trigger API and /metrics",
        ),
        Needed::AuthenticatedServing,
    ),
    when(
        call(
            Engine,
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            Cluster,
            "authorize callers of the trigger API and /metrics",
        ),
        Needed::AuthenticatedServing,
    ),
    when(
        call(
            Engine,
            "list",
            "metrics.k8s.io",
            "nodes",
            Cluster,
            "measured node usage: one LIST of NodeMetrics every 5 s (metricsUtilization)",
        ),
        Needed::KubernetesMetrics,
    ),
    when(
        call(
            Engine,
            "list",
            "metrics.k8s.io",
            "pods",
            AllNamespaces,
            "measured pod usage: one LIST of PodMetrics every 5 s (metricsUtilization)",
        ),
        Needed::KubernetesMetrics,
    ),
    named(
        when(
            call(
                Engine,
                "get",
                "",
                "secrets",
                PrometheusTokenNamespace,
                "the Prometheus bearer token (data key prometheusAuthToken), re-read every cycle",
            ),
            Needed::PrometheusTokenSecret,
        ),
        Names::PrometheusTokenSecret,
    ),
];

/// The guard's and the certificates hook's calls.
const GUARD_AND_CERTS_CALLS: &[ApiCall] = &[
    // ---- Guard (`webhook`) ------------------------------------------------------------------
    call(
        Guard,
        "get",
        "",
        "pods",
        AllNamespaces,
        "pod cache miss, and a fresh read before refusing or restarting",
    ),
    call(
        Guard,
        "list",
        "",
        "pods",
        AllNamespaces,
        "watch cache: the evicted pod (lean copy)",
    ),
    call(
        Guard,
        "watch",
        "",
        "pods",
        AllNamespaces,
        "watch cache: the evicted pod (lean copy)",
    ),
    call(
        Guard,
        "get",
        "",
        "persistentvolumeclaims",
        AllNamespaces,
        "access modes of the pod's claims (RWO blocks a surge), on demand",
    ),
    call(
        Guard,
        "list",
        "apps",
        "replicasets",
        AllNamespaces,
        "watch cache: the pod's owner",
    ),
    call(
        Guard,
        "watch",
        "apps",
        "replicasets",
        AllNamespaces,
        "watch cache: the pod's owner",
    ),
    call(
        Guard,
        "get",
        "apps",
        "replicasets",
        AllNamespaces,
        "cache miss on a just-created ReplicaSet",
    ),
    call(
        Guard,
        "list",
        "apps",
        "deployments",
        AllNamespaces,
        "watch cache: the ReplicaSet's owner",
    ),
    call(
        Guard,
        "watch",
        "apps",
        "deployments",
        AllNamespaces,
        "watch cache: the ReplicaSet's owner",
    ),
    call(
        Guard,
        "get",
        "apps",
        "deployments",
        AllNamespaces,
        "restart actor: fresh read before the compare-and-set",
    ),
    call(
        Guard,
        "patch",
        "apps",
        "deployments",
        AllNamespaces,
        "restart actor: rollout restart (json-patch with test op)",
    ),
    call(
        Guard,
        "list",
        "policy",
        "poddisruptionbudgets",
        AllNamespaces,
        "watch cache: health guard",
    ),
    call(
        Guard,
        "watch",
        "policy",
        "poddisruptionbudgets",
        AllNamespaces,
        "watch cache: health guard",
    ),
    call(
        Guard,
        "list",
        "",
        "nodes",
        Cluster,
        "watch cache: cordoned nodes (rule A)",
    ),
    call(
        Guard,
        "watch",
        "",
        "nodes",
        Cluster,
        "watch cache: cordoned nodes (rule A)",
    ),
    call(
        Guard,
        "get",
        "",
        "nodes",
        Cluster,
        "node cache miss on a just-registered node",
    ),
    call(
        Guard,
        "get",
        "",
        "namespaces",
        Cluster,
        "rule B: the namespace's opt-in annotation, when a budget blocks",
    ),
    call(
        Guard,
        "list",
        "autoscaling",
        "horizontalpodautoscalers",
        AllNamespaces,
        "rule B: an autoscaler that owns the replica count, when a budget blocks",
    ),
    call(
        Guard,
        "create",
        "events.k8s.io",
        "events",
        AllNamespaces,
        "events on the Deployment and the Pod",
    ),
    call(
        Guard,
        "patch",
        "events.k8s.io",
        "events",
        AllNamespaces,
        "series count of a repeated event",
    ),
    responder(
        "list",
        "EvictionRequest responder: watch cache of Evictions",
    ),
    responder(
        "watch",
        "EvictionRequest responder: watch cache of Evictions",
    ),
    sub(
        responder(
            "update",
            "EvictionRequest responder: its ResponderStatus (progress, heartbeat, completion)",
        ),
        "status",
    ),
    // ---- Certs hook Job (`certs --secret-name … --webhook-configuration …`) -----------------
    named(
        call(
            CertsJob,
            "get",
            "",
            "secrets",
            OwnNamespace,
            "reuse the CA of an existing serving-certificate Secret",
        ),
        Names::CertsSecret,
    ),
    call(
        CertsJob,
        "create",
        "",
        "secrets",
        OwnNamespace,
        "write the serving-certificate Secret the first time",
    ),
    named(
        call(
            CertsJob,
            "update",
            "",
            "secrets",
            OwnNamespace,
            "replace an expiring or mismatched certificate (resourceVersion compare-and-set)",
        ),
        Names::CertsSecret,
    ),
    named(
        call(
            CertsJob,
            "get",
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            Cluster,
            "read the webhooks whose caBundle does not trust the CA yet",
        ),
        Names::WebhookConfiguration,
    ),
    named(
        call(
            CertsJob,
            "patch",
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            Cluster,
            "set the caBundle (json-patch with a test op per webhook)",
        ),
        Names::WebhookConfiguration,
    ),
];

/// `plan --kubeconfig`'s calls other than its cluster reads.
const PLAN_READER_CALLS: &[ApiCall] = &[
    when(
        call(
            PlanReader,
            "list",
            "metrics.k8s.io",
            "nodes",
            Cluster,
            PLAN_METRICS,
        ),
        Needed::KubernetesMetrics,
    ),
    when(
        call(
            PlanReader,
            "list",
            "metrics.k8s.io",
            "pods",
            AllNamespaces,
            PLAN_METRICS,
        ),
        Needed::KubernetesMetrics,
    ),
];

/// Every Kubernetes API call of every component. Keep it exact: the chart's RBAC is derived from
/// and tested against it.
pub static API_CALLS: std::sync::LazyLock<Vec<ApiCall>> = std::sync::LazyLock::new(|| {
    let mut calls = cluster_reads(Engine, CACHE, CACHE);
    calls.extend_from_slice(ENGINE_CALLS);
    calls.extend_from_slice(GUARD_AND_CERTS_CALLS);
    calls.extend(cluster_reads(PlanReader, PLAN_LIST, PLAN_STREAM));
    calls.extend_from_slice(PLAN_READER_CALLS);
    calls
});

/// The calls of one component.
pub fn calls_of(component: Component) -> impl Iterator<Item = &'static ApiCall> {
    API_CALLS.iter().filter(move |c| c.component == component)
}

#[cfg(test)]
#[path = "apicalls_tests.rs"]
mod tests;
