//! Reading an `Eviction` (lifecycle.k8s.io/v1alpha1) from one responder's side, and writing that
//! responder's `ResponderStatus`: pure functions, no I/O.

use jiff::Timestamp;
use k8s_openapi::api::lifecycle::v1alpha1::{Eviction, ResponderStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `TargetResponder.state` values (`lifecycle.k8s.io/v1alpha1`).
pub mod state {
    /// Not this responder's turn yet.
    pub const INACTIVE: &str = "Inactive";
    /// This responder's turn.
    pub const ACTIVE: &str = "Active";
    /// The responder missed its heartbeat deadline; the next one took over.
    pub const INTERRUPTED: &str = "Interrupted";
    /// Every requester withdrew.
    pub const CANCELED: &str = "Canceled";
    /// The responder reported completion.
    pub const COMPLETED: &str = "Completed";
}

/// `Requester.intent` of a requester still asking for the eviction.
pub const INTENT_EVICTION: &str = "Eviction";

/// Where an Eviction stands for one responder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// The responder is not among the Eviction's target responders, or the target is not a pod.
    NotOurs,
    /// Listed, waiting for its turn (`Inactive`).
    Waiting,
    /// Its turn: `Active` and no completion reported yet.
    Active {
        /// The target pod: namespace, name, uid.
        pod: PodTarget,
        /// Every requester has withdrawn (the eviction is being canceled).
        withdrawn: bool,
        /// The names of the requesters still asking.
        requesters: Vec<String>,
    },
    /// Its turn is over: `Interrupted`, `Canceled`, `Completed`, or completion already reported.
    Over {
        /// The state (`Active` when completion is reported and the controller has not moved on).
        state: String,
    },
}

/// The pod an Eviction targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTarget {
    /// Namespace (the Eviction's).
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
}

impl PodTarget {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where `eviction` stands for the responder `name`.
pub fn turn_of(eviction: &Eviction, name: &str) -> Turn {
    let Some(status) = eviction.status.as_ref() else {
        return Turn::NotOurs;
    };
    let Some(target) = status
        .target_responders
        .iter()
        .flatten()
        .find(|t| t.name == name)
    else {
        return Turn::NotOurs;
    };
    let Some(pod) = eviction.spec.target.pod.as_ref() else {
        return Turn::NotOurs;
    };
    match target.state.as_str() {
        state::INACTIVE => return Turn::Waiting,
        state::ACTIVE => {}
        other => {
            return Turn::Over {
                state: other.to_owned(),
            };
        }
    }
    if own_status(eviction, name).is_some_and(|s| s.completion_time.is_some()) {
        return Turn::Over {
            state: state::ACTIVE.to_owned(),
        };
    }
    let requesters: Vec<String> = status
        .requesters
        .iter()
        .flatten()
        .filter(|r| r.intent == INTENT_EVICTION)
        .map(|r| r.name.clone())
        .collect();
    Turn::Active {
        pod: PodTarget {
            namespace: eviction.metadata.namespace.clone().unwrap_or_default(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        },
        withdrawn: requesters.is_empty(),
        requesters,
    }
}

/// The responder's own entry of `.status.responders`.
pub fn own_status<'e>(eviction: &'e Eviction, name: &str) -> Option<&'e ResponderStatus> {
    eviction
        .status
        .as_ref()?
        .responders
        .iter()
        .flatten()
        .find(|r| r.name == name)
}

/// What the responder reports in its `ResponderStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Human-readable progress (at most 4000 characters are written).
    pub message: String,
    /// When the step is expected to end (never before now).
    pub expected_completion: Option<Timestamp>,
    /// Completion: the responder's turn is over.
    pub complete: bool,
}

/// The API's limit on `ResponderStatus.message`.
pub const MAX_MESSAGE_CHARS: usize = 4000;

/// `eviction` with the responder `name`'s status set to `report` at `now` (heartbeat, and
/// completion when the report says so). `None` when the Eviction has no entry for it.
///
/// The API requires the times to be the present (within 30 s) and never before `startTime`, the
/// heartbeat never to decrease and `completionTime` never to change once set; `now` is clamped
/// to `startTime` and the previous heartbeat so a slightly slow clock does not break these.
pub fn with_report(
    eviction: &Eviction,
    name: &str,
    report: &Report,
    now: Timestamp,
) -> Option<Eviction> {
    let mut updated = eviction.clone();
    let entry = updated
        .status
        .as_mut()?
        .responders
        .as_mut()?
        .iter_mut()
        .find(|r| r.name == name)?;
    let floor = [entry.start_time.as_ref(), entry.heartbeat_time.as_ref()]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .max();
    let at = floor.map_or(now, |f| f.max(now));
    entry.heartbeat_time = Some(Time(at));
    entry.message = Some(report.message.chars().take(MAX_MESSAGE_CHARS).collect());
    if let Some(expected) = report.expected_completion {
        entry.expected_completion_time = Some(Time(expected.max(at)));
    }
    if report.complete && entry.completion_time.is_none() {
        entry.completion_time = Some(Time(at));
    }
    Some(updated)
}

/// When the responder last reported a heartbeat (or was started).
pub fn last_heartbeat(eviction: &Eviction, name: &str) -> Option<Timestamp> {
    let s = own_status(eviction, name)?;
    s.heartbeat_time
        .as_ref()
        .or(s.start_time.as_ref())
        .map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "kube-descheduler.io/guard";

    fn eviction(my_state: &str, requesters: serde_json::Value, completed: bool) -> Eviction {
        let mut mine = json!({"name": ME, "startTime": "2026-01-01T10:00:00Z"});
        if completed {
            mine["completionTime"] = json!("2026-01-01T10:01:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "Eviction",
            "metadata": {"name": "e", "namespace": "ns", "uid": "e-uid"},
            "spec": {"target": {"pod": {"name": "web-1", "uid": "pod-uid"}}},
            "status": {
                "requesters": requesters,
                "targetResponders": [
                    {"name": ME, "priority": 9000, "state": my_state},
                    {"name": "imperative-eviction.k8s.io/evictor", "priority": 100, "state": "Inactive"}
                ],
                "responders": [mine, {"name": "imperative-eviction.k8s.io/evictor"}]
            }
        }))
        .expect("a valid Eviction")
    }

    fn asking() -> serde_json::Value {
        json!([{"name": "a.example.com/x", "intent": "Eviction"}, {"name": "b.example.com/y", "intent": "Withdrawn"}])
    }

    #[test]
    fn an_active_responder_sees_the_pod_and_the_requesters_still_asking() {
        let turn = turn_of(&eviction("Active", asking(), false), ME);
        let Turn::Active {
            pod,
            withdrawn,
            requesters,
        } = turn
        else {
            panic!("{turn:?}");
        };
        assert_eq!(pod.key(), "ns/web-1");
        assert_eq!(pod.uid, "pod-uid");
        assert!(!withdrawn);
        assert_eq!(requesters, vec!["a.example.com/x".to_owned()]);
    }

    #[test]
    fn every_requester_withdrawn_is_a_withdrawal() {
        let all_withdrawn = json!([{"name": "a.example.com/x", "intent": "Withdrawn"}]);
        let turn = turn_of(&eviction("Active", all_withdrawn, false), ME);
        assert!(
            matches!(
                turn,
                Turn::Active {
                    withdrawn: true,
                    ..
                }
            ),
            "{turn:?}"
        );
    }

    #[test]
    fn states_other_than_active_or_a_reported_completion_are_not_our_turn() {
        assert_eq!(
            turn_of(&eviction("Inactive", asking(), false), ME),
            Turn::Waiting
        );
        for s in ["Interrupted", "Canceled", "Completed"] {
            assert_eq!(
                turn_of(&eviction(s, asking(), false), ME),
                Turn::Over {
                    state: s.to_owned()
                }
            );
        }
        assert!(matches!(
            turn_of(&eviction("Active", asking(), true), ME),
            Turn::Over { .. }
        ));
        assert_eq!(
            turn_of(&eviction("Active", asking(), false), "other.io/x"),
            Turn::NotOurs
        );
    }

    #[test]
    fn a_report_never_goes_back_in_time_and_completion_is_set_once() {
        let e = eviction("Active", asking(), false);
        let early: Timestamp = "2026-01-01T09:59:59Z".parse().expect("time");
        let report = Report {
            message: "x".repeat(5000),
            expected_completion: Some(early),
            complete: true,
        };
        let updated = with_report(&e, ME, &report, early).expect("our entry");
        let mine = own_status(&updated, ME).expect("our entry");
        let start: Timestamp = "2026-01-01T10:00:00Z".parse().expect("time");
        assert_eq!(mine.heartbeat_time.as_ref().map(|t| t.0), Some(start));
        assert_eq!(mine.completion_time.as_ref().map(|t| t.0), Some(start));
        assert_eq!(
            mine.expected_completion_time.as_ref().map(|t| t.0),
            Some(start)
        );
        assert_eq!(mine.message.as_ref().map(|m| m.chars().count()), Some(4000));
        assert_eq!(with_report(&e, "other.io/x", &report, early), None);
        // The other responder's entry is untouched.
        assert_eq!(
            updated
                .status
                .as_ref()
                .and_then(|s| s.responders.as_ref())
                .map(|r| r[1].clone()),
            e.status
                .as_ref()
                .and_then(|s| s.responders.as_ref())
                .map(|r| r[1].clone())
        );
    }
}
