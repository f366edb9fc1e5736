//! The eviction guard's decision evaluated against a snapshot: builds the guard's facts from the
//! engine's model, so `plan` (and `run --dry-run`) show what the guard would really do — evicted,
//! deflected into a rolling restart, or denied by a PodDisruptionBudget or the health rule.
//! PodDisruptionBudgets are spent as the plan goes, as the API server would spend them.
//!
//! Rule A sees the snapshot's cordoned nodes, and pods this plan already evicted count as being
//! evicted. Rule B is evaluated as a webhook started with `--pdb-surge` would: Deployments that
//! opted in by annotation, or whose namespace did (the snapshot keeps that one namespace
//! annotation), are surged (`deflected`), unless a HorizontalPodAutoscaler in the snapshot scales
//! them — then the guard's refusal naming the autoscaler is shown (`denied`).
//!
//! Rule A's replica census reads every pod of the Deployment; a cycle makes tens of thousands of
//! attempts, so each Deployment's pods are read once ([`Member`]) on its first attempt and each
//! later attempt only checks which of them this cycle has evicted since.

use rustc_hash::FxHashMap as HashMap;

use super::budgets::BudgetIndex;
use crate::replicas::ReplicaCensus;
use crate::{EvictionRequest, Facts, GuardConfig, Verdict, decide};

use jiff::Timestamp;

use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::evictor::planner::VerdictFn;
use kube_descheduler_engine::snapshot::model::{PodPhase, Volume};
use kube_descheduler_engine::snapshot::{ObjectKey, Pod, PodId, Snapshot};
use kube_descheduler_engine::workload::facts::OwnerFacts;
use kube_descheduler_engine::workload::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};

/// The guard's opt-out annotation and value (see [`kube_descheduler_engine::workload::annotations`]).
use kube_descheduler_engine::workload::annotations::{OPT_OUT, OPT_OUT_VALUE};

/// Guard facts about a pod of the snapshot.
pub fn pod_facts(p: &Pod) -> PodFacts {
    let mut facts = PodFacts {
        namespace: String::new(),
        name: String::new(),
        uid: String::new(),
        labels: p.labels.clone(),
        opt_out: false,
        phase: PodPhase::Unknown,
        terminating: false,
        ready: false,
        owner: None,
        pod_template_hash: None,
        claims: Vec::new(),
        ephemeral_single_node_volume: false,
    };
    fill_pod_facts(p, &mut facts);
    facts
}

/// Overwrites `facts` with the guard facts of `p`, reusing its strings' buffers (a plan builds
/// facts for every one of tens of thousands of eviction attempts).
fn fill_pod_facts(p: &Pod, facts: &mut PodFacts) {
    facts.namespace.clear();
    facts.namespace.push_str(&p.namespace);
    facts.name.clone_from(&p.name);
    facts.uid.clone_from(&p.uid);
    facts.labels.clone_from(&p.labels);
    facts.opt_out = p
        .annotations
        .get(OPT_OUT)
        .is_some_and(|v| v == OPT_OUT_VALUE);
    facts.phase = p.phase;
    facts.terminating = p.is_terminating();
    facts.ready = p.is_ready();
    match (p.controller(), &mut facts.owner) {
        (Some(o), Some(f)) => {
            f.kind.clone_from(&o.kind);
            f.name.clone_from(&o.name);
            f.uid.clone_from(&o.uid);
        }
        (Some(o), slot) => {
            *slot = Some(OwnerFacts {
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
            })
        }
        (None, slot) => *slot = None,
    }
    match (
        p.labels.get("pod-template-hash"),
        &mut facts.pod_template_hash,
    ) {
        (Some(h), Some(f)) => f.clone_from(h),
        (h, slot) => *slot = h.cloned(),
    }
    facts.claims.clear();
    facts
        .claims
        .extend(p.volumes.iter().filter_map(|v| match v {
            Volume::Pvc(c) => Some(c.clone()),
            _ => None,
        }));
    // The snapshot keeps no claim templates: assume a generic ephemeral volume is single-node
    // (the guard then does not deflect — the safe side).
    facts.ephemeral_single_node_volume =
        p.volumes.iter().any(|v| matches!(v, Volume::Ephemeral(_)));
}

/// State kept across the evictions of one plan: indexes and PodDisruptionBudgets being spent.
struct GuardState {
    config: GuardConfig,
    now: Timestamp,
    /// Every budget, in snapshot order, with their disruptions spent as the plan goes.
    budgets: BudgetIndex,
    /// `namespace/name` of the first autoscaler scaling each Deployment, by namespace and
    /// Deployment name (the webhook also takes the first one its list returns).
    hpa_of_deploy: HashMap<String, HashMap<String, String>>,
    /// The facts and request of the current eviction attempt; their buffers are reused.
    scratch: Option<(PodFacts, EvictionRequest)>,
    /// Rule A's view of each Deployment's pods, by index into `snapshot.deployments`, read on
    /// the Deployment's first eviction attempt.
    members_of_deploy: HashMap<usize, Vec<Member>>,
}

/// A pod of a Deployment as rule A's census reads it. None of this changes during a cycle; only
/// whether the pod was evicted does, and that is read from the snapshot at every attempt.
#[derive(Debug, Clone, Copy)]
struct Member {
    pod: PodId,
    ready: bool,
    terminating: bool,
    /// On a cordoned node (`None` node: schedulable, as the webhook counts an unknown node).
    cordoned: bool,
}

/// The pods of the Deployment whose ReplicaSets are `rs_uids` that the snapshot has not evicted.
/// Evictions only accumulate during a cycle (a new cycle gets a new verdict function), so a pod
/// left out here stays out.
fn deployment_members<'a>(
    snapshot: &Snapshot,
    rs_uids: impl Iterator<Item = &'a str>,
) -> Vec<Member> {
    rs_uids
        .flat_map(|rs_uid| snapshot.pods_owned_by(rs_uid))
        .map(|id| {
            let p = snapshot.pod(id);
            Member {
                pod: id,
                ready: p.is_ready(),
                terminating: p.is_terminating(),
                cordoned: p.node.is_some_and(|n| snapshot.node(n).unschedulable),
            }
        })
        .collect()
}

/// Rule A's census of `members` now, leaving out the evicted pod and the pods this plan evicted
/// (they left); nothing is being evicted elsewhere in a plan. [`crate::replicas::census`] leaves
/// the evicted pod out by name; a snapshot holds one pod per namespace/name (duplicates are
/// dropped when it is loaded) and a Deployment's pods share its namespace, so its id is the same
/// test without reading every member's name.
fn members_census(snapshot: &Snapshot, members: &[Member], evicted: PodId) -> ReplicaCensus {
    let mut c = ReplicaCensus::default();
    for m in members {
        if m.terminating || snapshot.is_evicted(m.pod) {
            continue;
        }
        if m.cordoned {
            c.on_unschedulable += 1;
        }
        if !m.ready || m.pod == evicted {
            continue;
        }
        c.other_ready += 1;
        if !m.cordoned {
            c.other_ready_staying += 1;
        }
    }
    c
}

impl GuardState {
    fn new(snapshot: &Snapshot, now: Timestamp, config: GuardConfig) -> Self {
        GuardState {
            config: GuardConfig {
                pdb_surge: true,
                ..config
            },
            now,
            budgets: BudgetIndex::new(snapshot),
            hpa_of_deploy: {
                let mut m: HashMap<String, HashMap<String, String>> = HashMap::default();
                for h in &snapshot.hpas {
                    m.entry(h.namespace.clone())
                        .or_default()
                        .entry(h.deployment.clone())
                        .or_insert_with(|| format!("{}/{}", h.namespace, h.name));
                }
                m
            },
            scratch: None,
            members_of_deploy: HashMap::default(),
        }
    }

    fn verdict(&mut self, snapshot: &Snapshot, pod: PodId) -> EvictOutcome {
        let (facts_pod, req) = self.attempt(snapshot.pod(pod));
        let rs: Option<&ReplicaSetFacts> = facts_pod
            .owner
            .as_ref()
            .filter(|o| o.kind == "ReplicaSet")
            .and_then(|o| snapshot.owners().replica_set(snapshot, &o.uid));
        let deployment_index: Option<usize> = rs
            .and_then(|r| r.owner.as_ref())
            .filter(|o| o.kind == "Deployment")
            .and_then(|o| snapshot.owners().deployment_position(snapshot, &o.uid));
        let deployment: Option<&DeploymentFacts> =
            deployment_index.map(|i| &*snapshot.deployments[i]);
        let pvcs = pvc_facts(snapshot, &facts_pod);
        let candidates = self
            .budgets
            .candidates(&facts_pod.namespace, &facts_pod.labels);
        let pdb_refs: Vec<&PdbFacts> = candidates.iter().map(|&i| &self.budgets.facts[i]).collect();
        let census = deployment_index.map(|i| {
            let members = self.members_of_deploy.entry(i).or_insert_with(|| {
                let owned = snapshot
                    .owners()
                    .replica_sets_of_deployment(snapshot, &snapshot.deployments[i].uid);
                deployment_members(snapshot, owned.map(|r| r.uid.as_str()))
            });
            members_census(snapshot, members, pod)
        });
        let facts = Facts {
            pod: Some(&facts_pod),
            replica_set: rs,
            deployment,
            pdbs: &pdb_refs,
            pvcs: &pvcs,
            first_denied_at: None,
            census,
            namespace_pdb_surge: deployment
                .and_then(|d| snapshot.namespace_pdb_surge(&d.namespace)),
            hpa: deployment
                .and_then(|d| self.hpa_of_deploy.get(&d.namespace)?.get(&d.name))
                .map(String::as_str),
        };
        let verdict = decide(&req, &facts, self.now, &self.config);
        if matches!(verdict, Verdict::Allow { .. }) && facts_pod.ready {
            self.spend_budgets(&candidates, &facts_pod);
        }
        self.scratch = Some((facts_pod, req));
        outcome_of(verdict)
    }

    /// The facts and eviction request of an attempt on `p`, in the buffers of the last attempt
    /// when there was one.
    fn attempt(&mut self, p: &Pod) -> (PodFacts, EvictionRequest) {
        let (facts_pod, mut req) = match self.scratch.take() {
            Some((mut facts, req)) => {
                fill_pod_facts(p, &mut facts);
                (facts, req)
            }
            None => (
                pod_facts(p),
                EvictionRequest {
                    namespace: String::new(),
                    name: String::new(),
                    uid_precondition: Some(String::new()),
                    dry_run: false,
                },
            ),
        };
        req.namespace.clone_from(&facts_pod.namespace);
        req.name.clone_from(&facts_pod.name);
        match &mut req.uid_precondition {
            Some(uid) => uid.clone_from(&facts_pod.uid),
            slot => *slot = Some(facts_pod.uid.clone()),
        }
        (facts_pod, req)
    }

    /// The API server spends a disruption of every budget covering a healthy pod it evicts:
    /// of the `candidates` budgets, those matching the pod.
    fn spend_budgets(&mut self, candidates: &[usize], facts_pod: &PodFacts) {
        for &i in candidates {
            let pdb = &mut self.budgets.facts[i];
            if pdb.matches(facts_pod) {
                pdb.disruptions_allowed = (pdb.disruptions_allowed - 1).max(0);
            }
        }
    }
}

/// The snapshot's facts about the claims of the pod that exist.
fn pvc_facts(snapshot: &Snapshot, facts_pod: &PodFacts) -> Vec<PvcFacts> {
    facts_pod
        .claims
        .iter()
        .filter_map(|c| {
            snapshot
                .pvcs
                .get(&ObjectKey::new(&facts_pod.namespace, c))
                .map(|info| PvcFacts {
                    name: c.clone(),
                    access_modes: info.access_modes.clone(),
                })
        })
        .collect()
}

/// What a plan records for the guard's `verdict`.
fn outcome_of(verdict: Verdict) -> EvictOutcome {
    match verdict {
        Verdict::Allow { .. } => EvictOutcome::Evicted,
        // A surge also ends with the pod leaving: once the new replicas are Ready the budget
        // allows the retried eviction.
        Verdict::Deflect { message, .. }
        | Verdict::DenyInFlight { message, .. }
        | Verdict::Surge { message, .. }
        | Verdict::DenySurging { message, .. } => EvictOutcome::Deflected { message },
        Verdict::DenyPdb { message, .. }
        | Verdict::DenyUnhealthy { message, .. }
        | Verdict::DenyHpa { message, .. } => EvictOutcome::Denied { reason: message },
    }
}

/// A verdict function for [`kube_descheduler_engine::evictor::planner::PlanBackend`] that applies the guard's rules.
pub fn guard_verdict(snapshot: &Snapshot, now: Timestamp, config: GuardConfig) -> VerdictFn {
    let mut state = GuardState::new(snapshot, now, config);
    Box::new(move |s: &Snapshot, pod: PodId| state.verdict(s, pod))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, labels: &str) -> String {
        format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{ns}","uid":"uid-{ns}-{name}","labels":{{{labels}}}}},
               "spec":{{"nodeName":"n1","containers":[{{"name":"c","image":"i"}}]}},
               "status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
    }

    fn pdb(ns: &str, name: &str, selector: &str, allowed: i32) -> String {
        format!(
            r#"{{"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{{"name":"{name}","namespace":"{ns}"}},
               "spec":{{"minAvailable":1,"selector":{selector}}},
               "status":{{"disruptionsAllowed":{allowed},"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}}}"#
        )
    }

    /// Reused buffers must never leak a field of the previous pod: filling facts that held
    /// another pod gives exactly the fresh facts, for every pod of a varied cluster.
    #[test]
    fn refilled_pod_facts_equal_fresh_ones() {
        let snap = kube_descheduler_engine::testing::synthetic_snapshot(20, 600, 9);
        let mut reused = pod_facts(snap.pod(0));
        let mut hashes = (0, 0);
        for p in (0..snap.pods.len() as PodId).rev() {
            fill_pod_facts(snap.pod(p), &mut reused);
            let fresh = pod_facts(snap.pod(p));
            assert_eq!(reused, fresh, "pod {p}");
            if fresh.pod_template_hash.is_some() {
                hashes.0 += 1
            } else {
                hashes.1 += 1
            }
        }
        assert!(
            hashes.0 > 0 && hashes.1 > 0,
            "pods with and without a template hash: {hashes:?}"
        );
    }

    /// The census from the Deployments' members read once equals the webhook's census of freshly
    /// listed siblings, as pods are evicted one by one across a varied cluster (cordoned nodes,
    /// unready and terminating pods).
    #[test]
    fn members_census_equals_the_census_of_fresh_siblings() {
        use crate::replicas::{Sibling, census};
        let mut snap = kube_descheduler_engine::testing::synthetic_snapshot(300, 3_000, 5);
        let rs_of = |snap: &Snapshot, d: usize| -> Vec<String> {
            snap.replica_sets
                .iter()
                .filter(|r| {
                    r.owner
                        .as_ref()
                        .is_some_and(|o| o.uid == snap.deployments[d].uid)
                })
                .map(|r| r.uid.clone())
                .collect()
        };
        let members: Vec<Vec<Member>> = (0..snap.deployments.len())
            .map(|d| deployment_members(&snap, rs_of(&snap, d).iter().map(String::as_str)))
            .collect();
        let cordoned = members.iter().flatten().filter(|m| m.cordoned).count();
        assert!(cordoned > 0, "some pods sit on cordoned nodes");
        let mut checked = 0;
        let mut nonzero = (0, 0, 0);
        for round in 0..4 {
            for (d, ms) in members.iter().enumerate() {
                let rs = rs_of(&snap, d);
                let fresh: Vec<Sibling> = rs
                    .iter()
                    .flat_map(|u| snap.pods_owned_by(u))
                    .map(|id| {
                        let p = snap.pod(id);
                        Sibling {
                            name: p.name.clone(),
                            ready: p.is_ready(),
                            terminating: p.is_terminating(),
                            node_unschedulable: p.node.map(|n| snap.node(n).unschedulable),
                            being_evicted: false,
                        }
                    })
                    .collect();
                for m in ms {
                    let name = snap.pod(m.pod).name.clone();
                    let want = census(&name, &fresh);
                    assert_eq!(members_census(&snap, ms, m.pod), want, "{name}");
                    nonzero.0 += usize::from(want.other_ready > 0);
                    nonzero.1 += usize::from(want.other_ready_staying > 0);
                    nonzero.2 += usize::from(want.on_unschedulable > 0);
                    checked += 1;
                }
                // Evict one pod of every other Deployment per round.
                if (d + round) % 2 == 0
                    && let Some(m) = ms.iter().find(|m| !snap.is_evicted(m.pod))
                {
                    snap.mark_evicted(m.pod);
                }
            }
        }
        assert!(checked > 1000, "{checked}");
        assert!(
            nonzero.0 > 0 && nonzero.1 > 0 && nonzero.2 > 0,
            "every count is exercised: {nonzero:?}"
        );
    }

    /// The budget index must find exactly the budgets a linear scan would: indexed by the first
    /// matchLabels pair, matchExpressions-only and empty selectors unindexed, per namespace, and
    /// spent as the plan goes.
    #[test]
    fn budget_index_matches_like_a_scan_and_spends_budgets() {
        let items = [
            r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#.to_string(),
            pdb("a", "fe", r#"{"matchLabels":{"app":"web","tier":"fe"}}"#, 1),
            pdb("a", "exprs", r#"{"matchExpressions":[{"key":"app","operator":"In","values":["db"]}]}"#, 0),
            pdb("b", "everything", "{}", 0),
            pod("a", "web-1", r#""app":"web","tier":"fe""#),
            pod("a", "web-2", r#""app":"web","tier":"fe""#),
            pod("a", "web-only-app", r#""app":"web""#),
            pod("a", "db-1", r#""app":"db""#),
            pod("b", "x", r#""anything":"goes""#),
            pod("c", "web-3", r#""app":"web","tier":"fe""#),
        ];
        let list = format!(
            r#"{{"kind":"List","apiVersion":"v1","items":[{}]}}"#,
            items.join(",")
        );
        let snap = kube_descheduler_engine::snapshot::load::load_bytes(list.as_bytes())
            .expect("test snapshot");
        let id = |ns: &str, name: &str| {
            (0..snap.pods.len() as PodId)
                .find(|&p| &*snap.pod(p).namespace == ns && snap.pod(p).name == name)
                .expect("pod in the test snapshot")
        };
        let mut verdict = guard_verdict(&snap, Timestamp::UNIX_EPOCH, GuardConfig::default());
        let denied_by = |o: EvictOutcome| match o {
            EvictOutcome::Denied { reason } => reason,
            other => panic!("expected a denial, got {other:?}"),
        };

        // The indexed budget allows one disruption: the first eviction spends it.
        assert_eq!(verdict(&snap, id("a", "web-1")), EvictOutcome::Evicted);
        assert!(denied_by(verdict(&snap, id("a", "web-2"))).contains("a/fe"));
        // Shares the index key (app=web) but lacks tier=fe: not covered.
        assert_eq!(
            verdict(&snap, id("a", "web-only-app")),
            EvictOutcome::Evicted
        );
        // matchExpressions only: found through the unindexed list.
        assert!(denied_by(verdict(&snap, id("a", "db-1"))).contains("a/exprs"));
        // An empty selector selects every pod of its namespace.
        assert!(denied_by(verdict(&snap, id("b", "x"))).contains("b/everything"));
        // Budgets of other namespaces never apply.
        assert_eq!(verdict(&snap, id("c", "web-3")), EvictOutcome::Evicted);
    }

    /// A 3-replica Deployment spread over nodes a (cordoned), b and c, a budget with
    /// `minAvailable: 3`, and the namespace's annotation and an autoscaler as given.
    fn rule_b_snapshot(namespace_annotation: Option<&str>, hpa: bool) -> Snapshot {
        let node = |name: &str, cordoned: bool| {
            format!(
                r#"{{"kind":"Node","apiVersion":"v1","metadata":{{"name":"{name}"}},"spec":{{"unschedulable":{cordoned}}},
                   "status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
            )
        };
        let pod = |name: &str, node: &str| {
            format!(
                r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"shop","uid":"uid-{name}",
                   "labels":{{"app":"web","pod-template-hash":"abc"}},
                   "ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-abc","uid":"rs-uid","controller":true}}]}},
                   "spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"i"}}]}},
                   "status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
            )
        };
        let annotations = namespace_annotation
            .map(|v| format!(r#","annotations":{{"kube-descheduler.io/pdb-surge":"{v}"}}"#))
            .unwrap_or_default();
        let mut items = vec![
            node("a", true),
            node("b", false),
            node("c", false),
            format!(r#"{{"kind":"Namespace","apiVersion":"v1","metadata":{{"name":"shop"{annotations}}}}}"#),
            r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"shop","uid":"d-uid","generation":1},
               "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}}}},
               "status":{"observedGeneration":1,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3}}"#.to_string(),
            r#"{"kind":"ReplicaSet","apiVersion":"apps/v1","metadata":{"name":"web-abc","namespace":"shop","uid":"rs-uid",
               "labels":{"pod-template-hash":"abc"},
               "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d-uid","controller":true}]},
               "spec":{"replicas":3},"status":{"replicas":3,"readyReplicas":3,"availableReplicas":3}}"#.to_string(),
            pod("web-a", "a"),
            pod("web-b", "b"),
            pod("web-c", "c"),
            r#"{"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{"name":"web","namespace":"shop"},
               "spec":{"minAvailable":3,"selector":{"matchLabels":{"app":"web"}}},
               "status":{"disruptionsAllowed":0,"currentHealthy":3,"desiredHealthy":3,"expectedPods":3}}"#.to_string(),
        ];
        if hpa {
            items.push(r#"{"kind":"HorizontalPodAutoscaler","apiVersion":"autoscaling/v2","metadata":{"name":"web-hpa","namespace":"shop"},
               "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":3,"maxReplicas":6}}"#.to_string());
        }
        let list = format!(
            r#"{{"kind":"List","apiVersion":"v1","items":[{}]}}"#,
            items.join(",")
        );
        let snap = kube_descheduler_engine::snapshot::load::load_bytes(list.as_bytes())
            .expect("test snapshot");
        assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
        snap
    }

    /// Rule B in `plan` sees the namespace's opt-in and the autoscalers of the snapshot: an
    /// opted-in namespace surges (`deflected`), an autoscaled Deployment is refused with the
    /// guard's message naming the autoscaler, and without the opt-in (or with the namespace
    /// opted out) the budget denies.
    #[test]
    fn rule_b_sees_namespace_opt_ins_and_autoscalers() {
        let outcome = |annotation: Option<&str>, hpa: bool| {
            let snap = rule_b_snapshot(annotation, hpa);
            let on_a = (0..snap.pods.len() as PodId)
                .find(|&p| snap.pod(p).name == "web-a")
                .expect("web-a");
            let mut verdict = guard_verdict(&snap, Timestamp::UNIX_EPOCH, GuardConfig::default());
            verdict(&snap, on_a)
        };
        match outcome(Some("enabled"), false) {
            EvictOutcome::Deflected { message } => assert!(
                message.contains("PodDisruptionBudget shop/web")
                    && message.contains("from 3 to 4 replicas"),
                "{message}"
            ),
            other => panic!("an opted-in namespace surges, got {other:?}"),
        }
        match outcome(Some("enabled"), true) {
            EvictOutcome::Denied { reason } => assert!(
                reason.contains("HorizontalPodAutoscaler shop/web-hpa")
                    && reason.contains("minReplicas"),
                "{reason}"
            ),
            other => panic!("an autoscaled Deployment is refused, got {other:?}"),
        }
        for annotation in [None, Some("disabled")] {
            for hpa in [false, true] {
                match outcome(annotation, hpa) {
                    EvictOutcome::Denied { reason } => assert!(
                        reason.contains("shop/web") && !reason.contains("HorizontalPodAutoscaler"),
                        "{annotation:?} {hpa}: {reason}"
                    ),
                    other => panic!("{annotation:?} {hpa}: the budget denies, got {other:?}"),
                }
            }
        }
    }
}
