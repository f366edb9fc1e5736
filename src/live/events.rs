//! Events on evicted pods, as upstream emits them (events.k8s.io/v1, reporting controller
//! `kube-descheduler`).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use kube_descheduler_engine::evictor::EvictionReason;

/// The reporting controller name on our Events.
pub const REPORTER: &str = "kube-descheduler";
/// Upstream's event action.
pub const ACTION: &str = "Descheduled";
/// Upstream's failure reason.
pub const REASON_FAILED: &str = "EvictionFailed";
/// Reason of the Event on a pod whose eviction `placement: Enforce` refused.
pub const REASON_PLACEMENT: &str = "EvictionRefusedByPlacement";
/// Action of that Event.
pub const ACTION_PLACEMENT: &str = "PlacementRefused";

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

    /// Normal Event after a successful eviction, as upstream: reason = the strategy (plugin) name
    /// (or `NotSet`), action `Descheduled`; the note adds the eviction's reason sentence (when the
    /// plugin gave more than its name) and the guard's answer (`extra`).
    pub async fn evicted(
        &self,
        pod: &PodRef<'_>,
        reason: &EvictionReason,
        strategy: &str,
        extra: Option<&str>,
    ) {
        let event_reason = if !strategy.is_empty() {
            strategy
        } else {
            "NotSet"
        };
        let note = evicted_note(pod.node, reason, strategy, extra);
        self.publish(pod, EventType::Normal, event_reason, note)
            .await;
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

    /// Warning `EvictionRefusedByPlacement` Event on a pod whose eviction `placement: Enforce`
    /// refused (action `PlacementRefused`); the note is [`placement_note`].
    pub async fn refused_by_placement(
        &self,
        pod: &PodRef<'_>,
        strategy: &str,
        refusal: &kube_descheduler_engine::placement::Refusal,
    ) {
        let reference = pod_reference(pod);
        self.publish_on(
            &reference,
            EventType::Warning,
            REASON_PLACEMENT,
            ACTION_PLACEMENT,
            placement_note(pod.node, strategy, refusal),
        )
        .await;
    }

    /// Warning `EvictedPodReturned` Event on the owner whose evicted pod's replacement was
    /// scheduled back onto the node it was evicted from (action `PlacementBackoff`).
    pub async fn returned(&self, r: &super::returns::Return) {
        let reference = ObjectReference {
            api_version: Some(r.owner.api_version.clone()),
            kind: Some(r.owner.kind.clone()),
            name: Some(r.owner.name.clone()),
            namespace: Some(r.owner.namespace.clone()),
            uid: Some(r.owner.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        self.publish_on(
            &reference,
            EventType::Warning,
            super::returns::EVENT_REASON,
            "PlacementBackoff",
            r.note(),
        )
        .await;
    }

    async fn publish(&self, pod: &PodRef<'_>, type_: EventType, reason: &str, note: String) {
        let reference = pod_reference(pod);
        self.publish_on(&reference, type_, reason, ACTION, note)
            .await;
    }

    async fn publish_on(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        mut note: String,
    ) {
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
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, reference).await {
            tracing::warn!(object = %format!("{}/{}", reference.namespace.as_deref().unwrap_or_default(), reference.name.as_deref().unwrap_or_default()), error = %e, "publishing event failed");
        }
    }
}

/// The reference of an Event on `pod`.
fn pod_reference(pod: &PodRef<'_>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.into()),
        namespace: Some(pod.namespace.into()),
        uid: Some(pod.uid.into()),
        ..Default::default()
    }
}

/// The note of an `EvictionRefusedByPlacement` Event: who refused what, the code, and the
/// sentence with the numbers, e.g. "HighNodeUtilization's eviction from n5 refused by
/// kube-descheduler's placement: Enforce (PlacementReturn): would be scheduled back onto n5: …".
pub fn placement_note(
    node: &str,
    strategy: &str,
    refusal: &kube_descheduler_engine::placement::Refusal,
) -> String {
    format!(
        "{strategy}'s eviction from {node} refused by {REPORTER}'s placement: Enforce ({}): {}",
        refusal.code.as_str(),
        refusal.message
    )
}

/// The note of a `Descheduled` Event: upstream's sentence, then the reason sentence (the same text
/// as the log line and `plan`) when it says more than the plugin name, then `extra`.
pub fn evicted_note(
    node: &str,
    reason: &EvictionReason,
    strategy: &str,
    extra: Option<&str>,
) -> String {
    let mut note = format!("pod eviction from {node} node by {REPORTER}");
    if !reason.text.is_empty() && reason.text != strategy {
        note.push_str(": ");
        note.push_str(&reason.text);
    }
    if let Some(extra) = extra {
        note.push_str(if note.contains(": ") { "; " } else { ": " });
        note.push_str(extra);
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placement_note_names_the_plugin_the_node_the_code_and_the_sentence() {
        let r = kube_descheduler_engine::placement::Refusal {
            code: kube_descheduler_engine::placement::RefusalCode::PlacementReturn,
            message: "would be scheduled back onto n5: score 694 on n5 vs 601 on n6".into(),
        };
        assert_eq!(
            placement_note("n5", "HighNodeUtilization", &r),
            "HighNodeUtilization's eviction from n5 refused by kube-descheduler's placement: Enforce (PlacementReturn): would be scheduled back onto n5: score 694 on n5 vs 601 on n6"
        );
    }

    #[test]
    fn the_note_carries_the_reason_sentence_and_the_guard_answer() {
        let plain = EvictionReason::plugin("PodLifeTime");
        assert_eq!(
            evicted_note("n1", &plain, "PodLifeTime", None),
            "pod eviction from n1 node by kube-descheduler"
        );
        let r = EvictionReason::new("TooManyRestarts", "restarts 17 >= podRestartThreshold 10");
        assert_eq!(
            evicted_note(
                "n1",
                &r,
                "RemovePodsHavingTooManyRestarts",
                Some("deflected")
            ),
            "pod eviction from n1 node by kube-descheduler: restarts 17 >= podRestartThreshold 10; deflected"
        );
        assert_eq!(
            evicted_note("n1", &plain, "PodLifeTime", Some("deflected")),
            "pod eviction from n1 node by kube-descheduler: deflected"
        );
    }
}
