//! Fixtures for the guard's tests and benchmarks: the Deployment `shop/web` (RollingUpdate 25 % /
//! 25 %, revision 3), its ReplicaSet `web-7d9f` and a Running, Ready pod of it. Offered for tests
//! without a stability promise; adjust a fixture with struct update syntax.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_descheduler_engine::snapshot::model::PodPhase;
use kube_descheduler_engine::workload::facts::{IntOrPercent, OwnerFacts, Strategy};

use crate::{DeploymentFacts, PodFacts, ReplicaSetFacts};

/// The running, Ready pod `shop/web-7d9f-abcde` of ReplicaSet `web-7d9f`, labelled `app=web`.
pub fn web_pod() -> PodFacts {
    PodFacts {
        namespace: "shop".into(),
        name: "web-7d9f-abcde".into(),
        uid: "pod-uid".into(),
        labels: Arc::new(BTreeMap::from([("app".into(), "web".into())])),
        opt_out: false,
        phase: PodPhase::Running,
        terminating: false,
        ready: true,
        owner: Some(OwnerFacts {
            kind: "ReplicaSet".into(),
            name: "web-7d9f".into(),
            uid: "rs-uid".into(),
        }),
        pod_template_hash: Some("7d9f".into()),
        claims: vec![],
        ephemeral_single_node_volume: false,
    }
}

/// ReplicaSet `shop/web-7d9f` (revision 3) of Deployment `web`, with `replicas` desired, present
/// and ready.
pub fn web_replica_set(replicas: i32) -> ReplicaSetFacts {
    ReplicaSetFacts {
        namespace: "shop".into(),
        name: "web-7d9f".into(),
        uid: "rs-uid".into(),
        owner: Some(OwnerFacts {
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "dep-uid".into(),
        }),
        revision: Some(3),
        pod_template_hash: Some("7d9f".into()),
        desired: replicas,
        replicas,
        ready: replicas,
    }
}

/// Deployment `shop/web` (uid `dep-uid`, revision 3, generation 2 observed) with `replicas`
/// desired, all of them updated, ready and available; no restart or surge recorded.
pub fn web_deployment(replicas: i32) -> DeploymentFacts {
    DeploymentFacts {
        namespace: "shop".into(),
        name: "web".into(),
        uid: "dep-uid".into(),
        replicas,
        strategy: Strategy::RollingUpdate {
            max_surge: IntOrPercent::Percent(25),
            max_unavailable: IntOrPercent::Percent(25),
        },
        paused: false,
        progress_deadline_exceeded: false,
        opt_out: false,
        revision: Some(3),
        generation: 2,
        observed_generation: 2,
        status_replicas: replicas,
        updated_replicas: replicas,
        ready_replicas: replicas,
        available_replicas: replicas,
        restart: None,
        pdb_surge: None,
        surge: None,
    }
}

/// A restarter that records every request and reports each restart as made.
#[derive(Debug, Default)]
pub struct RecordingRestarter(pub std::sync::Mutex<Vec<crate::restart::RestartRequest>>);

impl RecordingRestarter {
    /// How many restarts were asked for.
    pub fn count(&self) -> usize {
        self.0.lock().map_or(0, |seen| seen.len())
    }
}

impl crate::restart::Restarter for RecordingRestarter {
    fn restart(
        &self,
        req: crate::restart::RestartRequest,
    ) -> futures::future::BoxFuture<'_, crate::restart::RestartOutcome> {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(req);
        }
        Box::pin(std::future::ready(
            crate::restart::RestartOutcome::Restarted {
                at: jiff::Timestamp::UNIX_EPOCH,
            },
        ))
    }
}

/// A synced in-memory source holding the single-replica Deployment `shop/web`, its ReplicaSet
/// and its pod `shop/web-7d9f-abcde`.
pub fn single_replica_source() -> crate::source::MemorySource {
    let mut source = crate::source::MemorySource::new();
    source.pods.insert("shop/web-7d9f-abcde".into(), web_pod());
    source
        .replica_sets
        .insert("shop/web-7d9f".into(), Arc::new(web_replica_set(1)));
    source
        .deployments
        .insert("shop/web".into(), Arc::new(web_deployment(1)));
    source
}

/// Serves `router` over plain HTTP on an OS-chosen loopback port, on the current Tokio runtime
/// until it stops: its address.
pub async fn serve_on_loopback(router: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// A client of the fake API server `router`, served by [`serve_on_loopback`].
pub async fn fake_api_client(router: axum::Router) -> kube::Client {
    let addr = serve_on_loopback(router).await;
    let url = format!("http://{addr}").parse().expect("a loopback URL");
    kube::Client::try_from(kube::Config::new(url)).expect("a client")
}

/// The AdmissionReview the API server sends for a CREATE of `pods/eviction` of pod
/// `namespace/name` (`object`: the Eviction; `user_info`: the requester).
pub fn eviction_review(
    uid: &str,
    (namespace, name): (&str, &str),
    user_info: serde_json::Value,
    object: serde_json::Value,
    dry_run: bool,
) -> serde_json::Value {
    let eviction_kind = serde_json::json!({"group": "policy", "version": "v1", "kind": "Eviction"});
    let pods = serde_json::json!({"group": "", "version": "v1", "resource": "pods"});
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": eviction_kind, "resource": pods, "subResource": "eviction",
            "requestKind": eviction_kind, "requestResource": pods, "requestSubResource": "eviction",
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": user_info,
            "object": object, "oldObject": null, "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// Asserts that `message` is the deflection of an eviction for a rolling restart of Deployment
/// `deployment` in progress.
pub fn assert_restart_deflection(message: &str, deployment: &str) {
    assert!(
        message.contains("Eviction triggered evacuation"),
        "{message}"
    );
    assert!(
        message.contains(&format!("Deployment {deployment}")),
        "{message}"
    );
    assert!(
        message.contains("rolling restart is in progress"),
        "{message}"
    );
}
