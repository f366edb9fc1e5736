//! The cluster: kube-sim with its scratch directory, client certificates, admission configuration,
//! and the pod and Deployment state tests wait on.

use super::*;

/// A running kube-sim with its scratch directory (certificates, kubeconfig, kubectl HOME).
pub struct Cluster {
    pub sim: SimHandle,
    pub dir: tempfile::TempDir,
    /// The client certificate kube-sim presents to webhooks (as kube-apiserver does through its
    /// AdmissionConfiguration), and its CA; `None` for a cluster whose webhook calls are
    /// anonymous. Webhooks started with [`Webhook::start`] require it when it is set.
    pub webhook_client: Option<ClientPki>,
    /// Another client certificate from the same CA, with subject CN `not-the-apiserver`.
    pub same_ca_other_client: Option<ClientPki>,
}

/// A client CA and one client certificate it signed (PEM), with the CA written to `ca_file`.
#[derive(Debug, Clone)]
pub struct ClientPki {
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
}

impl ClientPki {
    /// The certificate and key as a reqwest identity.
    pub fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(format!("{}\n{}", self.cert_pem, self.key_pem).as_bytes())
            .expect("client identity")
    }
}

/// Makes a client CA named `ca_name` and a client certificate (extended key usage clientAuth)
/// with subject CN `cn`, writing the CA to `dir/<file_stem>-ca.crt`.
pub fn client_pki(dir: &Path, file_stem: &str, ca_name: &str, cn: &str) -> ClientPki {
    client_pkis(dir, file_stem, ca_name, &[cn]).remove(0)
}

/// [`client_pki`] with one certificate per name in `cns`, all from the same CA.
pub fn client_pkis(dir: &Path, file_stem: &str, ca_name: &str, cns: &[&str]) -> Vec<ClientPki> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let ca_file = dir.join(format!("{file_stem}-ca.crt"));
    std::fs::write(&ca_file, ca_cert.pem()).expect("write client CA");
    cns.iter()
        .map(|cn| {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
            params.distinguished_name.push(DnType::CommonName, *cn);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let cert = params.signed_by(&key, &issuer).expect("client certificate");
            ClientPki {
                ca_pem: ca_cert.pem(),
                ca_file: ca_file.clone(),
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            }
        })
        .collect()
}

/// Writes kube-apiserver's files for webhook client certificates into `dir` — an
/// `AdmissionConfiguration` whose `ValidatingAdmissionWebhook` plugin names a kubeconfig whose
/// user `<service>.<namespace>.svc` carries `pki`'s certificate — and returns the
/// AdmissionConfiguration's path (what `--admission-control-config-file` takes).
pub fn write_admission_config(dir: &Path, pki: &ClientPki) -> PathBuf {
    std::fs::write(dir.join("webhook-client.crt"), &pki.cert_pem).expect("write client cert");
    std::fs::write(dir.join("webhook-client.key"), &pki.key_pem).expect("write client key");
    let kubeconfig = dir.join("webhook-kubeconfig.yaml");
    // Service port 443: the name without a port matches (kube-apiserver's rule).
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: {WEBHOOK_SERVICE}.{WEBHOOK_NAMESPACE}.svc\n  user:\n    client-certificate: webhook-client.crt\n    client-key: webhook-client.key\n"
        ),
    )
    .expect("write webhook kubeconfig");
    let admission = dir.join("admission-config.yaml");
    std::fs::write(
        &admission,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        ),
    )
    .expect("write admission configuration");
    admission
}

impl Cluster {
    /// Starts kube-sim with controllers on, pods Ready [`POD_START_SECONDS`] after they start,
    /// presenting a client certificate to webhooks.
    pub async fn start(objects: Vec<Value>) -> Cluster {
        Self::start_with_tick(objects, SimOptions::default().tick).await
    }

    /// [`Cluster::start`] with the node to drain, `n1`, and a spare `n2` cordoned until the
    /// workload is up, so that every pod of `apps` (name, replicas) is Ready on `n1`.
    pub async fn start_on_n1(workload: Vec<Value>, apps: &[(&str, usize)]) -> Cluster {
        let mut objects = vec![node("n1", true), node("n2", false)];
        objects.extend(workload);
        let cluster = Self::start(objects).await;
        cluster.wait_ready_on(apps, "n1").await;
        cluster
    }

    /// [`Cluster::start_on_n1`] with one replica of Deployment `app` behind a budget
    /// `minAvailable: 1`, which never allows its eviction by itself.
    pub async fn start_single_replica_behind_budget(app: &str) -> Cluster {
        Self::start_on_n1(
            vec![
                deployment(app, 1, Strategy::Default),
                pdb_min_available(app, 1),
            ],
            &[(app, 1)],
        )
        .await
    }

    /// [`Cluster::start`] whose webhook calls are anonymous (no client certificate).
    pub async fn start_unauthenticated(objects: Vec<Value>) -> Cluster {
        Self::start_with(objects, SimOptions::default().tick, false).await
    }

    /// [`Cluster::start`] with another controller tick (real time between reconciles).
    pub async fn start_with_tick(objects: Vec<Value>, tick: Duration) -> Cluster {
        Self::start_with(objects, tick, true).await
    }

    pub(crate) async fn start_with(
        objects: Vec<Value>,
        tick: Duration,
        webhook_auth: bool,
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut pkis = if webhook_auth {
            client_pkis(
                dir.path(),
                "webhook-client",
                "kube-sim-webhook-client-ca",
                &["kube-apiserver", "not-the-apiserver"],
            )
        } else {
            Vec::new()
        };
        let same_ca_other_client = pkis.pop();
        let webhook_client = pkis.pop();
        let mut objects = objects;
        objects.insert(
            0,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        );
        let mut opts = SimOptions {
            objects,
            kubeconfig_path: Some(dir.path().join("kubeconfig")),
            tick,
            ..Default::default()
        };
        if let Some(pki) = &webhook_client {
            let admission = write_admission_config(dir.path(), pki);
            opts.webhook_auth =
                kube_sim::webhook_auth::WebhookAuth::from_admission_config(&admission)
                    .expect("admission configuration loads");
        }
        opts.config.pod_start_delay_seconds = POD_START_SECONDS;
        let sim = Sim::start(opts).await.expect("kube-sim starts");
        Cluster {
            sim,
            dir,
            webhook_client,
            same_ca_other_client,
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.sim.kubeconfig_path().to_path_buf()
    }

    /// Cordons or uncordons a node (as `kubectl cordon` would, without kubectl).
    pub fn set_schedulable(&self, name: &str, schedulable: bool) {
        let mut n = self.sim.get("v1", "Node", "", name).expect("node exists");
        n["spec"]["unschedulable"] = json!(!schedulable);
        self.sim.apply(n).expect("node update");
    }

    /// Pods of `app` in [`NS`] (terminating ones included).
    pub fn pods(&self, app: &str) -> Vec<Value> {
        pods_of(&self.sim, app)
    }

    /// The Deployment `name` in [`NS`].
    pub fn deployment(&self, name: &str) -> Value {
        self.sim
            .get("apps/v1", "Deployment", NS, name)
            .unwrap_or(Value::Null)
    }

    /// The template's `kubectl.kubernetes.io/restartedAt`, if any.
    pub fn restarted_at(&self, name: &str) -> Option<String> {
        self.deployment(name)
            .pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
            .and_then(Value::as_str)
            .map(String::from)
    }

    /// Waits until every Deployment has all its replicas Ready (and not terminating) on `node`,
    /// and its status says so (see [`deployment_settled`]).
    pub async fn wait_ready_on(&self, apps: &[(&str, usize)], node: &str) {
        let what = format!("{apps:?} Ready on {node}, as their Deployments report");
        wait_until(&what, Duration::from_secs(90), || {
            apps.iter().all(|(app, n)| {
                let ready = ready_pods(&self.sim, app);
                ready.len() == *n
                    && ready.iter().all(|p| node_of(p) == node)
                    && deployment_settled(&self.deployment(app), *n)
            })
        })
        .await;
    }

    /// Waits until `app` has `n` Ready pods (anywhere) and its Deployment's status says so.
    pub async fn wait_settled(&self, app: &str, n: usize) {
        wait_until(
            &format!("{app}: {n} Ready pod(s), as its Deployment reports"),
            Duration::from_secs(90),
            || {
                ready_pods(&self.sim, app).len() == n
                    && deployment_settled(&self.deployment(app), n)
            },
        )
        .await;
    }

    /// Waits until `app` has exactly `n` pods, all Ready, none terminating and none on `not_on`.
    pub async fn wait_moved(&self, app: &str, n: usize, not_on: &str) {
        wait_until(
            &format!("{app} to run {n} Ready pod(s) off {not_on}"),
            Duration::from_secs(90),
            || {
                let pods = self.pods(app);
                pods.len() == n
                    && pods
                        .iter()
                        .all(|p| is_ready(p) && !is_terminating(p) && node_of(p) != not_on)
            },
        )
        .await;
    }

    /// EvictionDeflected Events regarding the Deployment `name`.
    pub fn deflection_events(&self, name: &str) -> usize {
        self.sim
            .list("events.k8s.io/v1", "Event", Some(NS))
            .iter()
            .filter(|e| {
                e["reason"] == "EvictionDeflected"
                    && e["regarding"]["kind"] == "Deployment"
                    && e["regarding"]["name"] == name
            })
            .count()
    }

    /// ReplicaSets owned by the Deployment `name`.
    pub fn replica_sets(&self, name: &str) -> Vec<Value> {
        self.sim
            .list("apps/v1", "ReplicaSet", Some(NS))
            .into_iter()
            .filter(|rs| {
                rs.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|o| o.iter().any(|r| r["name"] == name))
            })
            .collect()
    }
}

pub fn pods_of(sim: &SimHandle, app: &str) -> Vec<Value> {
    sim.list("v1", "Pod", Some(NS))
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .collect()
}

/// The Deployment's status has caught up with `n` Ready pods of its current template: observed
/// its generation and reports `n` replicas, all updated, Ready and available (what `kubectl
/// rollout status` waits for, plus `readyReplicas`).
///
/// Pods being Ready is not enough: the status follows them a few controller ticks later (kubelet
/// → ReplicaSet status → Deployment status, as with the real controllers), and a sampler or a
/// resourceVersion taken in between sees the stale pre-Ready status (`readyReplicas` 0).
pub fn deployment_settled(d: &Value, n: usize) -> bool {
    let int = |ptr: &str| d.pointer(ptr).and_then(Value::as_i64).unwrap_or(0);
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    d.pointer("/status/observedGeneration").is_some()
        && int("/status/observedGeneration") >= int("/metadata/generation")
        && [
            "/status/replicas",
            "/status/updatedReplicas",
            "/status/readyReplicas",
            "/status/availableReplicas",
        ]
        .iter()
        .all(|p| int(p) == n)
}

pub fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

pub fn is_terminating(p: &Value) -> bool {
    p.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

pub fn node_of(p: &Value) -> &str {
    p.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Pods of `app` that serve: Ready and not terminating.
pub fn ready_pods(sim: &SimHandle, app: &str) -> Vec<Value> {
    pods_of(sim, app)
        .into_iter()
        .filter(|p| is_ready(p) && !is_terminating(p))
        .collect()
}

/// Polls `f` every 50 ms until it holds; panics naming `what` after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
