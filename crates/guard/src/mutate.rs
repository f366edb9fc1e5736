//! The opt-in pod mutation (`POST /mutate/pod`): at pod creation, give pods of single-replica
//! RollingUpdate Deployments the guard's EvictionRequest responder in `spec.evictionResponders`
//! (the field is immutable once the pod exists).
//!
//! The responder's priority ([`DEFAULT_PRIORITY`], 9000) sits below the 10000 the API reserves
//! for the pod's managing controller, so a controller that registers itself there answers first
//! and the guard is its fallback, and above the default `imperative-eviction.k8s.io/evictor`
//! (100), so the guard answers before the pod is evicted. 0-999 belong to `*.k8s.io` responders.
//!
//! The mutation never refuses a pod: when anything cannot be read, the pod is admitted unchanged.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::responder::RESPONDER_NAME;
use kube_descheduler_engine::workload::annotations::is_opt_out;

/// The priority the mutation gives the guard's responder: below the managing controller's 10000.
pub const DEFAULT_PRIORITY: i32 = 9000;

/// The API's limit on `spec.evictionResponders`.
pub const MAX_POD_RESPONDERS: usize = 10;

/// The mutation's parts: the API (to read the pod's ReplicaSet and Deployment) and the priority.
pub struct PodMutation {
    client: Client,
    priority: i32,
}

impl PodMutation {
    /// A mutation reading with `client`, adding the responder at `priority`.
    pub fn new(client: Client, priority: i32) -> Self {
        PodMutation { client, priority }
    }

    /// The response to one pod admission: the patch adding the responder, or none.
    pub async fn review(&self, request: &AdmissionRequest<Pod>) -> AdmissionResponse {
        let response = AdmissionResponse::from(request);
        if request.operation != Operation::Create {
            return response;
        }
        let Some(pod) = request.object.as_ref() else {
            return response;
        };
        let namespace = request.namespace.clone().or_else(|| pod.namespace());
        let Some(namespace) = namespace else {
            return response;
        };
        let deployment = match self.deployment_of(pod, &namespace).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(namespace = %namespace, error = %e, "pod mutation: reading the pod's Deployment; admitting it unchanged");
                return response;
            }
        };
        let Some(patch) = responder_patch(pod, deployment.as_ref(), self.priority) else {
            return response;
        };
        match response.clone().with_patch(patch) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "pod mutation: encoding the patch");
                response
            }
        }
    }

    /// The Deployment that controls the pod through its ReplicaSet, if any.
    async fn deployment_of(
        &self,
        pod: &Pod,
        namespace: &str,
    ) -> Result<Option<Deployment>, kube::Error> {
        let Some(rs_name) = controller_of(pod.owner_references(), "ReplicaSet") else {
            return Ok(None);
        };
        let rs: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
        let Some(rs) = rs.get_opt(&rs_name).await? else {
            return Ok(None);
        };
        let Some(d_name) = controller_of(rs.owner_references(), "Deployment") else {
            return Ok(None);
        };
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        deployments.get_opt(&d_name).await
    }
}

fn controller_of(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    kind: &str,
) -> Option<String> {
    owners
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind)
        .map(|o| o.name.clone())
}

/// The JSON patch adding the guard's responder to `pod`, when its Deployment has one replica,
/// rolls with RollingUpdate, has not opted out, and the pod does not list the responder already
/// (nor the API's maximum of responders).
pub fn responder_patch(
    pod: &Pod,
    deployment: Option<&Deployment>,
    priority: i32,
) -> Option<json_patch::Patch> {
    let d = deployment?;
    let spec = &d.spec;
    let rolling = spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    if spec.replicas.unwrap_or(1) != 1 || !rolling || is_opt_out(d.metadata.annotations.as_ref()) {
        return None;
    }
    let pod_spec = pod.spec.as_ref()?;
    let ours = json!({"name": RESPONDER_NAME, "priority": priority});
    let op = match pod_spec.eviction_responders.as_ref() {
        None => json!({"op": "add", "path": "/spec/evictionResponders", "value": [ours]}),
        Some(list) if list.iter().any(|r| r.name == RESPONDER_NAME) => return None,
        Some(list) if list.len() >= MAX_POD_RESPONDERS => return None,
        Some(_) => json!({"op": "add", "path": "/spec/evictionResponders/-", "value": ours}),
    };
    serde_json::from_value(json!([op])).ok()
}

/// The mutation's route, `POST /mutate/pod`, accepting bodies up to `max_body_bytes`.
pub fn mutate_router(mutation: Arc<PodMutation>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/mutate/pod", post(mutate))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(mutation)
}

async fn mutate(State(mutation): State<Arc<PodMutation>>, body: Bytes) -> Response {
    let review: AdmissionReview<Pod> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview of a Pod: {e}"),
            )
                .into_response();
        }
    };
    let request: AdmissionRequest<Pod> = match review.try_into() {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("AdmissionReview without a request: {e}"),
            )
                .into_response();
        }
    };
    axum::Json(mutation.review(&request).await.into_review()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i32, strategy: &str, opt_out: bool) -> Deployment {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"replicas": replicas, "strategy": {"type": strategy},
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
        }))
        .expect("a Deployment");
        if opt_out {
            d.metadata.annotations = Some(
                [(
                    "kube-descheduler.io/eviction-guard".to_owned(),
                    "disabled".to_owned(),
                )]
                .into(),
            );
        }
        d
    }

    fn pod(responders: serde_json::Value) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if !responders.is_null() {
            spec["evictionResponders"] = responders;
        }
        serde_json::from_value(json!({"metadata": {"name": "web-1"}, "spec": spec})).expect("a Pod")
    }

    fn patched(pod: &Pod, patch: &json_patch::Patch) -> serde_json::Value {
        let mut v = serde_json::to_value(pod).expect("json");
        json_patch::patch(&mut v, patch).expect("the patch applies");
        v["spec"]["evictionResponders"].clone()
    }

    #[test]
    fn a_single_replica_rolling_deployments_pod_gets_the_responder() {
        let p = pod(serde_json::Value::Null);
        let patch = responder_patch(&p, Some(&deployment(1, "RollingUpdate", false)), 9000)
            .expect("a patch");
        assert_eq!(
            patched(&p, &patch),
            json!([{"name": "kube-descheduler.io/guard", "priority": 9000}])
        );
        let p = pod(json!([{"name": "acme.io/db", "priority": 10000}]));
        let patch = responder_patch(&p, Some(&deployment(1, "RollingUpdate", false)), 9000)
            .expect("a patch");
        assert_eq!(
            patched(&p, &patch),
            json!([{"name": "acme.io/db", "priority": 10000}, {"name": "kube-descheduler.io/guard", "priority": 9000}])
        );
    }

    #[test]
    fn other_pods_are_left_alone() {
        let p = pod(serde_json::Value::Null);
        assert!(responder_patch(&p, None, 9000).is_none());
        assert!(responder_patch(&p, Some(&deployment(2, "RollingUpdate", false)), 9000).is_none());
        assert!(responder_patch(&p, Some(&deployment(1, "Recreate", false)), 9000).is_none());
        assert!(responder_patch(&p, Some(&deployment(1, "RollingUpdate", true)), 9000).is_none());
        let listed = pod(json!([{"name": "kube-descheduler.io/guard", "priority": 12000}]));
        assert!(
            responder_patch(&listed, Some(&deployment(1, "RollingUpdate", false)), 9000).is_none()
        );
        let full: Vec<_> = (0..10)
            .map(|i| json!({"name": format!("r{i}.example.com/x"), "priority": 2000}))
            .collect();
        assert!(
            responder_patch(
                &pod(json!(full)),
                Some(&deployment(1, "RollingUpdate", false)),
                9000
            )
            .is_none()
        );
    }
}
