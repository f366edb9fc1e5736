//! Events on evicted pods, as upstream emits them (events.k8s.io/v1, reporting controller
//! `kube-descheduler`).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// The reporting controller name on our Events.
pub const REPORTER: &str = "kube-descheduler";
/// Upstream's event action.
pub const ACTION: &str = "Descheduled";
/// Upstream's failure reason.
pub const REASON_FAILED: &str = "EvictionFailed";

/// Publishes eviction Events; failures to publish are logged, never fatal.
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
}

/// The pod an Event is about.
pub struct PodRef<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// UID.
    pub uid: &'a str,
    /// Node name (may be empty).
    pub node: &'a str,
}

impl EventSink {
    /// A sink reporting as `kube-descheduler` (instance: `$POD_NAME` when set).
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        EventSink {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Normal Event after a successful eviction: reason = the eviction reason (or strategy name,
    /// or `NotSet`), action `Descheduled`.
    pub async fn evicted(
        &self,
        pod: &PodRef<'_>,
        reason: &str,
        strategy: &str,
        extra: Option<&str>,
    ) {
        let reason = if !reason.is_empty() {
            reason
        } else if !strategy.is_empty() {
            strategy
        } else {
            "NotSet"
        };
        let mut note = format!("pod eviction from {} node by {REPORTER}", pod.node);
        if let Some(extra) = extra {
            note.push_str(": ");
            note.push_str(extra);
        }
        self.publish(pod, EventType::Normal, reason, note).await;
    }

    /// Warning `EvictionFailed` Event (only when the policy sets `evictionFailureEventNotification`).
    pub async fn failed(&self, pod: &PodRef<'_>, error: &str) {
        let note = format!(
            "pod eviction from {} node by {REPORTER} failed: {error}",
            pod.node
        );
        self.publish(pod, EventType::Warning, REASON_FAILED, note)
            .await;
    }

    async fn publish(&self, pod: &PodRef<'_>, type_: EventType, reason: &str, mut note: String) {
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let ev = Event {
            type_,
            reason: reason.chars().take(128).collect(),
            note: Some(note),
            action: ACTION.into(),
            secondary: None,
        };
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.into()),
            namespace: Some(pod.namespace.into()),
            uid: Some(pod.uid.into()),
            ..Default::default()
        };
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), error = %e, "publishing event failed");
        }
    }
}
