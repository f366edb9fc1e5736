//! `run --eviction-api EvictionRequest`: eviction decisions become EvictionRequests
//! (`lifecycle.k8s.io/v1alpha1`, alpha in Kubernetes 1.37 behind the `EvictionRequestAPI` feature
//! gate) instead of Eviction POSTs. The evictionrequest-controller aggregates the requests of all
//! requesters into an Eviction that the pod's responders carry out.
//!
//! One request per pod instance, named [`request_name`] (the API leaves the name to the requester;
//! `spec.target.pod` names the pod and its UID), requester [`REQUESTER`], labelled
//! [`MANAGED_BY_LABEL`]=[`MANAGED_BY`] so `run` finds its own requests again after a restart.
//! A request of ours that exists already is reused (its intent set back to `Eviction` if it was
//! withdrawn), never duplicated; a pod a later cycle no longer wants gets its intent `Withdrawn`.

use k8s_openapi::api::lifecycle::v1alpha1::{
    EvictionRequest, EvictionRequestPodReference, EvictionRequestSpec, EvictionRequestTarget,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

pub use super::background::Outstanding;
use super::events::PodRef;

/// `spec.requester` of our requests.
pub const REQUESTER: &str = "kube-descheduler.io/descheduler";
/// The API group and version.
pub const GROUP_VERSION: &str = "lifecycle.k8s.io/v1alpha1";
/// Label marking the requests `run` created.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "kube-descheduler";
/// `spec.intent` asking for the eviction.
pub const INTENT_EVICTION: &str = "Eviction";
/// `spec.intent` withdrawing it.
pub const INTENT_WITHDRAWN: &str = "Withdrawn";

/// How `run` carries out an eviction decision (`--eviction-api`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EvictionApi {
    /// POST the pod's `eviction` subresource (upstream's behaviour).
    #[default]
    #[value(name = "Eviction")]
    Eviction,
    /// Create an EvictionRequest (`lifecycle.k8s.io/v1alpha1`) for the pod.
    #[value(name = "EvictionRequest")]
    EvictionRequest,
}

impl EvictionApi {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionApi::Eviction => "Eviction",
            EvictionApi::EvictionRequest => "EvictionRequest",
        }
    }

    /// What the path does, in one line.
    pub fn describe(self) -> String {
        match self {
            EvictionApi::Eviction => {
                "Eviction (each eviction POSTs the pod's eviction subresource, policy/v1)".into()
            }
            EvictionApi::EvictionRequest => format!(
                "EvictionRequest (each eviction creates an EvictionRequest, {GROUP_VERSION}, requester {REQUESTER}; the pod's eviction responders evict it)"
            ),
        }
    }
}

/// The name of our request for the pod with `uid`: unique per pod instance and requester.
pub fn request_name(uid: &str) -> String {
    format!("{MANAGED_BY}-{uid}")
}

/// Our request for `pod` with `intent`.
pub fn request_object(pod: &PodRef<'_>, intent: &str) -> EvictionRequest {
    EvictionRequest {
        metadata: ObjectMeta {
            name: Some(request_name(pod.uid)),
            namespace: Some(pod.namespace.to_string()),
            labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into()),
            ..Default::default()
        },
        spec: EvictionRequestSpec {
            intent: intent.to_string(),
            requester: REQUESTER.to_string(),
            target: EvictionRequestTarget {
                pod: Some(EvictionRequestPodReference {
                    name: pod.name.to_string(),
                    uid: pod.uid.to_string(),
                }),
            },
        },
        status: None,
    }
}

/// What asking for a pod's eviction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A new request was created.
    Created,
    /// Our request existed with intent `Eviction`: nothing written.
    Existing,
    /// Our request existed withdrawn: its intent is `Eviction` again.
    Renewed,
}

/// Creates our request for `pod`, or reuses ours when it exists. A request of that name that is
/// not ours (another requester, another pod) is an error.
pub async fn ask(client: &Client, pod: &PodRef<'_>) -> Result<Asked, String> {
    let api: Api<EvictionRequest> = Api::namespaced(client.clone(), pod.namespace);
    let obj = request_object(pod, INTENT_EVICTION);
    let name = request_name(pod.uid);
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => return Ok(Asked::Created),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(format!("creating EvictionRequest {name:?}: {e}")),
    }
    let existing = api
        .get(&name)
        .await
        .map_err(|e| format!("reading the existing EvictionRequest {name:?}: {e}"))?;
    let target_uid = existing.spec.target.pod.as_ref().map(|p| p.uid.as_str());
    if existing.spec.requester != REQUESTER || target_uid != Some(pod.uid) {
        return Err(format!(
            "EvictionRequest {name:?} exists with requester {:?} for pod UID {:?}; not ours for this pod",
            existing.spec.requester,
            target_uid.unwrap_or_default()
        ));
    }
    if existing.spec.intent == INTENT_EVICTION {
        return Ok(Asked::Existing);
    }
    set_intent(client, pod.namespace, &name, INTENT_EVICTION).await?;
    Ok(Asked::Renewed)
}

/// Sets our request's `spec.intent` (a merge patch; the requester may change the intent only).
/// A request that is gone needs nothing.
pub async fn set_intent(
    client: &Client,
    namespace: &str,
    name: &str,
    intent: &str,
) -> Result<(), String> {
    let api: Api<EvictionRequest> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({ "spec": { "intent": intent } });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(format!(
            "setting the intent of EvictionRequest {namespace}/{name} to {intent}: {e}"
        )),
    }
}

/// Checks that the server serves EvictionRequests and returns our requests with intent
/// `Eviction` (they count against the limits until withdrawn or their pod is gone).
pub async fn start(client: &Client) -> anyhow::Result<Vec<Outstanding>> {
    check_served(client).await?;
    list_outstanding(client).await.map_err(|e| {
        anyhow::anyhow!("--eviction-api EvictionRequest: listing EvictionRequests: {e}")
    })
}

/// Our requests with intent `Eviction`, in every namespace.
pub async fn list_outstanding(client: &Client) -> Result<Vec<Outstanding>, kube::Error> {
    let api: Api<EvictionRequest> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")))
        .await?;
    Ok(list.items.into_iter().filter_map(outstanding).collect())
}

/// `req` as an outstanding request of ours (None: not ours, or withdrawn).
fn outstanding(req: EvictionRequest) -> Option<Outstanding> {
    if req.spec.requester != REQUESTER || req.spec.intent != INTENT_EVICTION {
        return None;
    }
    let pod = req.spec.target.pod?;
    Some(Outstanding {
        uid: pod.uid,
        namespace: req.metadata.namespace?,
        pod: pod.name,
        name: req.metadata.name?,
    })
}

/// The start-up error when the server does not serve the API.
pub fn not_served(detail: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--eviction-api EvictionRequest: the API server does not serve EvictionRequests ({GROUP_VERSION}: {detail}); \
         they are alpha in Kubernetes 1.37 and need the EvictionRequestAPI feature gate and \
         --runtime-config={GROUP_VERSION}=true on kube-apiserver"
    )
}

/// Fails unless discovery of [`GROUP_VERSION`] lists `evictionrequests`.
async fn check_served(client: &Client) -> anyhow::Result<()> {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) if list.resources.iter().any(|r| r.name == "evictionrequests") => Ok(()),
        Ok(_) => Err(not_served(
            "the group version has no evictionrequests resource",
        )),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(not_served("404 on discovery")),
        Err(e) => Err(anyhow::anyhow!(
            "--eviction-api EvictionRequest: discovery of {GROUP_VERSION} failed: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_the_pod_its_uid_and_our_requester() {
        let pod = PodRef {
            namespace: "ns",
            name: "web-1",
            uid: "0b5f6c1e-0000-4000-8000-000000000001",
            node: "n1",
        };
        let r = request_object(&pod, INTENT_EVICTION);
        assert_eq!(
            r.metadata.name.as_deref(),
            Some("kube-descheduler-0b5f6c1e-0000-4000-8000-000000000001")
        );
        assert_eq!(r.spec.requester, REQUESTER);
        let target = r.spec.target.pod.clone().expect("a pod target");
        assert_eq!(
            (target.name.as_str(), target.uid.as_str()),
            ("web-1", pod.uid)
        );
        assert!(outstanding(r.clone()).is_some());
        let mut other = r;
        other.spec.requester = "acme.io/drainer".into();
        assert_eq!(
            outstanding(other),
            None,
            "another requester's request is not ours"
        );
    }
}
