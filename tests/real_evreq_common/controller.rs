//! A STAND-IN for the evictionrequest-controller, which Kubernetes 1.37.2 does not ship
//! (kube-apiserver serves `lifecycle.k8s.io/v1alpha1` with the `EvictionRequestAPI` gate, but
//! kube-controller-manager has no controller for it). It follows KEP-4563 and the documented
//! semantics of `k8s.io/api/lifecycle/v1alpha1`, as far as the tests need, and nothing more:
//!
//! - the EvictionRequests of a pod become one `Eviction` (requesters aggregated in
//!   `.status.requesters`, requester and responder names as labels);
//! - `.status.targetResponders` are the pod's `spec.evictionResponders` plus
//!   `imperative-eviction.k8s.io/evictor` at 100, sorted by priority (then domain, as the API
//!   server's validation sorts them); the first is `Active` (with `startTime`), the others
//!   `Inactive`;
//! - the Active responder's `completionTime` makes it `Completed` and the next one `Active`; a
//!   heartbeat older than [`HEARTBEAT_DEADLINE`] (the API's 20 minutes, which the API server
//!   enforces) makes it `Interrupted` and the next one `Active`; no next one: `Failed`
//!   (`NoFurtherResponder`);
//! - every requester `Withdrawn` (or its EvictionRequest deleted): the Active responder becomes
//!   `Canceled` (`Completed` if it reported completion) and `Failed` (`CanceledDueToNoRequesters`)
//!   is set; Inactive responders never run;
//! - the pod gone or terminal: `TargetEvicted` (`PodDeleted` / `PodTerminal`), once the Active
//!   responder has reported completion or [`GONE_GRACE`] has passed (a liberty of the stand-in:
//!   the responder that removed the pod gets to say so);
//! - it is also the imperative evictor: when that responder is Active it calls `pods/eviction`
//!   every few seconds until it succeeds, reporting the refusal in its message;
//! - Evictions without any EvictionRequest left are deleted.
//!
//! Not done: EvictionRequest status conditions, label updates after creation, PodGroups.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::lifecycle::v1alpha1::{
    Eviction, EvictionPodReference, EvictionRequest, EvictionSpec, EvictionStatus, EvictionTarget,
    Requester, ResponderStatus, TargetResponder,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};

/// The default responder's name and priority.
pub const IMPERATIVE: &str = "imperative-eviction.k8s.io/evictor";
const IMPERATIVE_PRIORITY: i32 = 100;
/// The API's heartbeat deadline (kube-apiserver refuses an earlier interruption).
pub const HEARTBEAT_DEADLINE: Duration = Duration::from_secs(20 * 60);

/// How long the Active responder may take to report completion once the target is gone.
pub const GONE_GRACE: Duration = Duration::from_secs(10);

/// The stand-in's memory: since when each Eviction's target has been seen gone.
#[derive(Default)]
pub struct Controller {
    gone_since: HashMap<String, Instant>,
}

impl Controller {
    /// One pass over every EvictionRequest and Eviction. Errors are returned for the caller to log.
    pub async fn sync(&mut self, client: &Client) -> Result<(), kube::Error> {
        sync(client, &mut self.gone_since).await
    }
}

async fn sync(
    client: &Client,
    gone_since: &mut HashMap<String, Instant>,
) -> Result<(), kube::Error> {
    let requests: Api<EvictionRequest> = Api::all(client.clone());
    let evictions: Api<Eviction> = Api::all(client.clone());
    let mut by_pod: BTreeMap<(String, String), Vec<EvictionRequest>> = BTreeMap::new();
    for r in requests.list(&ListParams::default()).await?.items {
        let Some(pod) = r.spec.target.pod.as_ref() else {
            continue;
        };
        by_pod
            .entry((r.namespace().unwrap_or_default(), pod.uid.clone()))
            .or_default()
            .push(r);
    }
    let existing = evictions.list(&ListParams::default()).await?.items;
    for e in &existing {
        let key = (e.namespace().unwrap_or_default(), target_uid(e));
        match by_pod.remove(&key) {
            Some(reqs) => advance(client, e, &requesters(&reqs), gone_since).await?,
            None => {
                Api::<Eviction>::namespaced(client.clone(), &key.0)
                    .delete(&e.name_any(), &DeleteParams::default())
                    .await?;
            }
        }
    }
    for ((ns, _), reqs) in by_pod {
        let asked = requesters(&reqs);
        if asked.iter().any(|r| r.intent == "Eviction") {
            create(client, &ns, &reqs[0], &asked).await?;
        }
    }
    Ok(())
}

fn target_uid(e: &Eviction) -> String {
    e.spec
        .target
        .pod
        .as_ref()
        .map(|p| p.uid.clone())
        .unwrap_or_default()
}

fn requesters(reqs: &[EvictionRequest]) -> Vec<Requester> {
    let mut out: Vec<Requester> = reqs
        .iter()
        .map(|r| Requester {
            name: r.spec.requester.clone(),
            intent: r.spec.intent.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The API server's order: priority descending, then the domain's labels from the top, then
/// the key.
pub fn sort_responders(list: &mut [TargetResponder]) {
    fn parts(name: &str) -> (Vec<String>, String) {
        let (domain, key) = name.split_once('/').unwrap_or((name, ""));
        (
            domain.split('.').rev().map(str::to_owned).collect(),
            key.to_owned(),
        )
    }
    list.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| parts(&a.name).cmp(&parts(&b.name)))
    });
}

async fn create(
    client: &Client,
    ns: &str,
    req: &EvictionRequest,
    asked: &[Requester],
) -> Result<(), kube::Error> {
    let Some(target) = req.spec.target.pod.as_ref() else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Some(pod) = pods.get_opt(&target.name).await? else {
        return Ok(());
    };
    if pod.metadata.uid.as_deref() != Some(target.uid.as_str()) {
        return Ok(());
    }
    let targets = target_responders(&pod);
    let api: Api<Eviction> = Api::namespaced(client.clone(), ns);
    let created = api
        .create(
            &PostParams::default(),
            &Eviction {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{}-", target.name)),
                    labels: Some(labels(asked, &targets)),
                    ..Default::default()
                },
                spec: EvictionSpec {
                    target: EvictionTarget {
                        pod: Some(EvictionPodReference {
                            name: target.name.clone(),
                            uid: target.uid.clone(),
                        }),
                    },
                },
                status: None,
            },
        )
        .await?;
    let mut with_status = created;
    with_status.status = Some(initial_status(asked, targets));
    api.replace_status(
        &with_status.name_any(),
        &PostParams::default(),
        &with_status,
    )
    .await?;
    Ok(())
}

/// The pod's responders and the imperative evictor, sorted, all `Inactive`.
fn target_responders(pod: &Pod) -> Vec<TargetResponder> {
    let mut targets: Vec<TargetResponder> = pod
        .spec
        .as_ref()
        .and_then(|s| s.eviction_responders.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| TargetResponder {
            name: r.name,
            priority: r.priority,
            state: "Inactive".into(),
        })
        .collect();
    targets.push(TargetResponder {
        name: IMPERATIVE.into(),
        priority: IMPERATIVE_PRIORITY,
        state: "Inactive".into(),
    });
    sort_responders(&mut targets);
    targets
}

/// Requester and responder names as label keys, their role as value.
fn labels(asked: &[Requester], targets: &[TargetResponder]) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = asked
        .iter()
        .map(|r| (r.name.clone(), "requester".to_owned()))
        .collect();
    for t in targets {
        let role = if labels.contains_key(&t.name) {
            "requester-responder"
        } else {
            "responder"
        };
        labels.insert(t.name.clone(), role.to_owned());
    }
    labels
}

/// The first status: the requesters, the first responder `Active` (started now), the others
/// `Inactive`, an entry in `.status.responders` for each.
fn initial_status(asked: &[Requester], mut targets: Vec<TargetResponder>) -> EvictionStatus {
    let now = Time(Timestamp::now());
    let responders = targets
        .iter()
        .enumerate()
        .map(|(i, t)| ResponderStatus {
            name: t.name.clone(),
            start_time: (i == 0).then(|| now.clone()),
            ..Default::default()
        })
        .collect();
    if let Some(first) = targets.first_mut() {
        first.state = "Active".into();
    }
    EvictionStatus {
        observed_generation: Some(1),
        requesters: Some(asked.to_vec()),
        target_responders: Some(targets),
        responders: Some(responders),
        conditions: None,
    }
}

fn condition(type_: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(Timestamp::now()),
        observed_generation: Some(1),
    }
}

fn is_final(s: &EvictionStatus) -> bool {
    s.conditions
        .iter()
        .flatten()
        .any(|c| (c.type_ == "Failed" || c.type_ == "TargetEvicted") && c.status == "True")
}

/// Moves an existing Eviction on: requesters, withdrawal, target gone, completion, heartbeat
/// deadline, and the imperative evictor's work.
async fn advance(
    client: &Client,
    e: &Eviction,
    asked: &[Requester],
    gone_since: &mut HashMap<String, Instant>,
) -> Result<(), kube::Error> {
    let Some(mut status) = e.status.clone() else {
        return Ok(());
    };
    if is_final(&status) || status.target_responders.is_none() {
        return Ok(());
    }
    let ns = e.namespace().unwrap_or_default();
    let before = status.clone();
    status.requesters = Some(asked.to_vec());
    let mut targets = status.target_responders.clone().unwrap_or_default();
    sort_responders(&mut targets);
    let active = targets.iter().position(|t| t.state == "Active");
    let responders = status.responders.clone().unwrap_or_default();
    let own = |name: &str| responders.iter().find(|r| r.name == name).cloned();
    let completed = |name: &str| own(name).is_some_and(|r| r.completion_time.is_some());
    let gone = pod_state(client, &ns, e).await?;
    let uid = e.uid().unwrap_or_default();
    // The target is gone but the Active responder has not said so yet: wait for it (a while).
    let hold = match (gone, active) {
        (Some(_), Some(i)) if !completed(&targets[i].name) => {
            let since = *gone_since.entry(uid).or_insert_with(Instant::now);
            since.elapsed() < GONE_GRACE
        }
        _ => {
            gone_since.remove(&uid);
            false
        }
    };
    let withdrawn = !asked.iter().any(|r| r.intent == "Eviction");
    if hold {
        // Nothing moves until the responder reports, or the grace runs out.
    } else if gone.is_some() || withdrawn {
        let done = active.is_some_and(|i| completed(&targets[i].name));
        finish(&mut status, &mut targets, active, gone, done);
    } else if let Some(i) = active {
        let name = targets[i].name.clone();
        let beat = own(&name)
            .and_then(|r| r.heartbeat_time.or(r.start_time))
            .map(|t| t.0);
        let late = beat.is_some_and(|b| {
            Timestamp::now().duration_since(b).unsigned_abs() >= HEARTBEAT_DEADLINE
        });
        if completed(&name) || late {
            hand_on(&mut status, &mut targets, i, completed(&name));
        } else if name == IMPERATIVE {
            evict_imperatively(client, &ns, e, &mut status).await?;
        }
    }
    status.target_responders = Some(targets);
    if status != before {
        let mut updated = e.clone();
        updated.status = Some(status);
        Api::<Eviction>::namespaced(client.clone(), &ns)
            .replace_status(&e.name_any(), &PostParams::default(), &updated)
            .await?;
    }
    Ok(())
}

/// Ends the Eviction: the Active responder `Completed` (`done`), else `Interrupted` when the
/// target is `gone`, else `Canceled` (every requester withdrew); the condition saying why.
fn finish(
    status: &mut EvictionStatus,
    targets: &mut [TargetResponder],
    active: Option<usize>,
    gone: Option<&'static str>,
    done: bool,
) {
    if let Some(i) = active {
        targets[i].state = if done {
            "Completed"
        } else if gone.is_some() {
            "Interrupted"
        } else {
            "Canceled"
        }
        .into();
    }
    let c = match gone {
        Some(reason) => condition("TargetEvicted", reason, "the target pod is gone"),
        None => condition(
            "Failed",
            "CanceledDueToNoRequesters",
            "every requester withdrew",
        ),
    };
    status.conditions.get_or_insert_with(Vec::new).push(c);
}

/// The Active responder `i` is done (`Completed`) or missed its heartbeat deadline
/// (`Interrupted`): the next one becomes `Active`, or the Eviction fails with no further one.
fn hand_on(
    status: &mut EvictionStatus,
    targets: &mut [TargetResponder],
    i: usize,
    completed: bool,
) {
    targets[i].state = if completed {
        "Completed"
    } else {
        "Interrupted"
    }
    .into();
    match targets.get_mut(i + 1) {
        Some(next) => {
            next.state = "Active".into();
            let next_name = next.name.clone();
            if let Some(r) = status
                .responders
                .iter_mut()
                .flatten()
                .find(|r| r.name == next_name)
            {
                r.start_time = Some(Time(Timestamp::now()));
            }
        }
        None => status
            .conditions
            .get_or_insert_with(Vec::new)
            .push(condition(
                "Failed",
                "NoFurtherResponder",
                "no responder evicted the target",
            )),
    }
}

/// `Some(reason)` when the target pod is gone (`PodDeleted`) or terminal (`PodTerminal`).
async fn pod_state(
    client: &Client,
    ns: &str,
    e: &Eviction,
) -> Result<Option<&'static str>, kube::Error> {
    let Some(target) = e.spec.target.pod.as_ref() else {
        return Ok(None);
    };
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get_opt(&target.name)
        .await?;
    Ok(match pod {
        None => Some("PodDeleted"),
        Some(p) if p.metadata.uid.as_deref() != Some(target.uid.as_str()) => Some("PodDeleted"),
        Some(p)
            if matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ) =>
        {
            Some("PodTerminal")
        }
        Some(_) => None,
    })
}

/// The imperative evictor: `pods/eviction` with the target's uid as precondition; success sets
/// its completion, a refusal its message (and a heartbeat at most every 20 s).
async fn evict_imperatively(
    client: &Client,
    ns: &str,
    e: &Eviction,
    status: &mut EvictionStatus,
) -> Result<(), kube::Error> {
    let Some(target) = e.spec.target.pod.as_ref() else {
        return Ok(());
    };
    let params = kube::api::EvictParams {
        delete_options: Some(kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let outcome = Api::<Pod>::namespaced(client.clone(), ns)
        .evict(&target.name, &params)
        .await;
    let Some(mine) = status
        .responders
        .iter_mut()
        .flatten()
        .find(|r| r.name == IMPERATIVE)
    else {
        return Ok(());
    };
    let now = Timestamp::now();
    let floor = [mine.start_time.as_ref(), mine.heartbeat_time.as_ref()]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .max();
    let at = Time(floor.map_or(now, |f| f.max(now)));
    match outcome {
        Ok(_) => {
            mine.message = Some("evicted through pods/eviction".into());
            mine.heartbeat_time = Some(at.clone());
            mine.completion_time = Some(at);
        }
        Err(kube::Error::Api(s)) => {
            let due = mine
                .heartbeat_time
                .as_ref()
                .is_none_or(|h| now.duration_since(h.0).as_secs() >= 20);
            if due {
                mine.message = Some(format!("pods/eviction refused ({}): {}", s.code, s.message));
                mine.heartbeat_time = Some(at);
            }
        }
        Err(other) => return Err(other),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn responder(name: &str, priority: i32, state: &str) -> TargetResponder {
        TargetResponder {
            name: name.into(),
            priority,
            state: state.into(),
        }
    }

    /// `first` Active at priority 9000, then the imperative responder Inactive, and their status.
    fn active_then_imperative(first: &str) -> (EvictionStatus, Vec<TargetResponder>) {
        let targets = vec![
            responder(first, 9000, "Active"),
            responder(IMPERATIVE, 100, "Inactive"),
        ];
        (status_for(&targets), targets)
    }

    fn status_for(targets: &[TargetResponder]) -> EvictionStatus {
        EvictionStatus {
            responders: Some(
                targets
                    .iter()
                    .map(|t| ResponderStatus {
                        name: t.name.clone(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn responders_sort_by_priority_then_top_domain_label_then_key() {
        let mut l = vec![
            responder(IMPERATIVE, 100, "Inactive"),
            responder("b.example.org/x", 9000, "Inactive"),
            responder("a.example.com/y", 9000, "Inactive"),
            responder("a.example.com/x", 9000, "Inactive"),
            responder("z.io/x", 10000, "Inactive"),
        ];
        sort_responders(&mut l);
        let names: Vec<_> = l.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "z.io/x",
                "a.example.com/x",
                "a.example.com/y",
                "b.example.org/x",
                IMPERATIVE
            ]
        );
    }

    #[test]
    fn a_missed_heartbeat_interrupts_and_activates_the_next_one_and_the_last_fails() {
        let (mut status, mut targets) = active_then_imperative("kube-descheduler.io/guard");
        hand_on(&mut status, &mut targets, 0, false);
        assert_eq!(targets[0].state, "Interrupted");
        assert_eq!(targets[1].state, "Active");
        let next = &status.responders.as_ref().expect("responders")[1];
        assert!(next.start_time.is_some(), "the next one is started");
        assert!(status.conditions.is_none());
        hand_on(&mut status, &mut targets, 1, true);
        assert_eq!(targets[1].state, "Completed");
        let failed = &status.conditions.as_ref().expect("a condition")[0];
        assert_eq!(
            (failed.type_.as_str(), failed.reason.as_str()),
            ("Failed", "NoFurtherResponder")
        );
    }

    #[test]
    fn a_withdrawal_cancels_the_active_responder_and_a_gone_pod_evicts() {
        let (mut status, mut targets) = active_then_imperative("a.io/x");
        finish(&mut status, &mut targets, Some(0), None, false);
        assert_eq!(targets[0].state, "Canceled");
        assert_eq!(
            targets[1].state, "Inactive",
            "Inactive responders never run"
        );
        assert_eq!(
            status.conditions.as_ref().expect("condition")[0].reason,
            "CanceledDueToNoRequesters"
        );
        let mut targets = vec![responder("a.io/x", 9000, "Active")];
        let mut status = status_for(&targets);
        finish(&mut status, &mut targets, Some(0), Some("PodDeleted"), true);
        assert_eq!(targets[0].state, "Completed");
        assert_eq!(
            status.conditions.as_ref().expect("condition")[0].type_,
            "TargetEvicted"
        );
    }
}
