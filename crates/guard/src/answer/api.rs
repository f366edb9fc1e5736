//! The API server's PodDisruptionBudget check of an eviction, on a snapshot.
//!
//! Unlike upstream's dry run (which fakes the client and so never sees a PodDisruptionBudget),
//! `run --dry-run` and `plan` apply these rules to the evictions the guard lets through.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::snapshot::model::PodPhase;
use kube_descheduler_engine::snapshot::{PodId, Snapshot};
use rustc_hash::FxHashMap;

use super::budgets::BudgetIndex;

/// Message of the API server's PDB refusal (429).
pub const PDB_VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The budget check for every eviction of one cycle: the budgets selecting a pod are remembered
/// by the pod's namespace and labels (pods of one owner share one labels `Arc`), so matching
/// happens once per owner, not once per attempt.
pub struct ApiBudgets {
    index: BudgetIndex,
    /// Indexes into `snapshot.pdbs` of the budgets selecting a pod, keyed by the addresses of
    /// its namespace and labels; the `Arc`s are kept so that no other value takes an address.
    matched: FxHashMap<(usize, usize), MatchedBudgets>,
}

/// The budgets selecting pods with one namespace and labels `Arc`.
struct MatchedBudgets {
    _namespace: Arc<str>,
    _labels: Arc<BTreeMap<String, String>>,
    budgets: Vec<usize>,
}

impl ApiBudgets {
    /// Indexes `snapshot.pdbs`.
    pub fn new(snapshot: &Snapshot) -> Self {
        ApiBudgets {
            index: BudgetIndex::new(snapshot),
            matched: FxHashMap::default(),
        }
    }

    /// The API server's PodDisruptionBudget check for an eviction of `pod`.
    pub fn verdict(&mut self, snapshot: &Snapshot, pod: PodId) -> EvictOutcome {
        let p = snapshot.pod(pod);
        let key = (
            Arc::as_ptr(&p.namespace) as *const u8 as usize,
            Arc::as_ptr(&p.labels) as usize,
        );
        let index = &self.index;
        let found = self.matched.entry(key).or_insert_with(|| MatchedBudgets {
            _namespace: Arc::clone(&p.namespace),
            _labels: Arc::clone(&p.labels),
            budgets: index.matching(&p.namespace, &p.labels),
        });
        let matching: Vec<&PodDisruptionBudget> =
            found.budgets.iter().map(|&i| &*snapshot.pdbs[i]).collect();
        budget_verdict(p, &matching)
    }
}

/// The API server's PodDisruptionBudget check for an eviction of `pod` (indexes the budgets on
/// every call: for one-off checks; a cycle uses [`ApiBudgets`]).
pub fn pdb_verdict(snapshot: &Snapshot, pod: PodId) -> EvictOutcome {
    ApiBudgets::new(snapshot).verdict(snapshot, pod)
}

/// The verdict for pod `p` given the budgets that select it.
fn budget_verdict(
    p: &kube_descheduler_engine::snapshot::Pod,
    matching: &[&PodDisruptionBudget],
) -> EvictOutcome {
    // Terminal, pending and terminating pods are deleted without a PDB check.
    if matches!(
        p.phase,
        PodPhase::Succeeded | PodPhase::Failed | PodPhase::Pending
    ) || p.deletion_timestamp.is_some()
    {
        return EvictOutcome::Evicted;
    }
    match matching {
        [] => EvictOutcome::Evicted,
        [pdb] => {
            let name = pdb.metadata.name.as_deref().unwrap_or_default();
            let Some(status) = pdb.status.as_ref() else {
                return EvictOutcome::Denied {
                    reason: format!("{PDB_VIOLATION} (PodDisruptionBudget {name} has no status yet)"),
                };
            };
            let generation = pdb.metadata.generation.unwrap_or(0);
            if status.observed_generation.unwrap_or(0) < generation {
                return EvictOutcome::Denied {
                    reason: format!(
                        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} is still being processed by the server."
                    ),
                };
            }
            // Unready pods may go while the budget is healthy (IfHealthyBudget, the default) or
            // always (AlwaysAllow).
            if !p.is_ready() {
                let always = pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
                    == Some("AlwaysAllow");
                if always || status.current_healthy.unwrap_or(0) >= status.desired_healthy.unwrap_or(0) {
                    return EvictOutcome::Evicted;
                }
            }
            if status.disruptions_allowed.unwrap_or(0) <= 0 {
                EvictOutcome::Denied {
                    reason: format!(
                        "{PDB_VIOLATION} The disruption budget {name} needs {} healthy pods and has {} currently",
                        status.desired_healthy.unwrap_or(0),
                        status.current_healthy.unwrap_or(0)
                    ),
                }
            } else {
                EvictOutcome::Evicted
            }
        }
        _ => EvictOutcome::Failed {
            error: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::{
        PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube_core::SelectorExt;
    use kube_descheduler_engine::snapshot::SnapshotBuilder;
    use kube_descheduler_engine::testing::{node, pod};

    fn pdb(allowed: i32) -> PodDisruptionBudget {
        let mut p = PodDisruptionBudget::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("ns".into());
        p.spec = Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        p.status = Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            current_healthy: Some(1),
            desired_healthy: Some(1),
            expected_pods: Some(1),
            ..Default::default()
        });
        p
    }

    fn snap(allowed: i32) -> Snapshot {
        let mut b = SnapshotBuilder::new();
        b.add_node(&node("n1").build()).ok();
        b.add_pod(&pod("ns", "a", "n1").label("app", "web").build())
            .ok();
        b.add_pod(&pod("ns", "b", "n1").label("app", "other").build())
            .ok();
        b.add_pdb(&pdb(allowed));
        b.build()
    }

    #[test]
    fn pdb_with_no_disruptions_denies() {
        let s = snap(0);
        match pdb_verdict(&s, 0) {
            EvictOutcome::Denied { reason } => assert!(reason.starts_with(PDB_VIOLATION)),
            o => panic!("expected denial, got {o:?}"),
        }
        assert_eq!(pdb_verdict(&s, 1), EvictOutcome::Evicted);
    }

    /// Pods sharing a labels `Arc` (one owner) reuse the first pod's match; pods with equal
    /// labels in another namespace, or other labels, are matched anew.
    #[test]
    fn remembered_matches_follow_namespace_and_labels() {
        let mut b = SnapshotBuilder::new();
        b.add_node(&node("n1").build()).ok();
        for (ns, name, app) in [
            ("ns", "a", "web"),
            ("ns", "b", "other"),
            ("other-ns", "c", "web"),
        ] {
            b.add_pod(&pod(ns, name, "n1").label("app", app).build())
                .ok();
        }
        b.add_pdb(&pdb(0));
        let mut s = b.build();
        // A second pod sharing pod a's namespace and labels, as pods of one owner do.
        let mut twin = (*s.pods[0]).clone();
        twin.name = "a-twin".into();
        s.pods.push(Arc::new(twin));
        assert!(Arc::ptr_eq(&s.pods[0].labels, &s.pods[3].labels));
        let mut index = ApiBudgets::new(&s);
        let denied = |o: EvictOutcome| matches!(o, EvictOutcome::Denied { .. });
        assert!(denied(index.verdict(&s, 0)));
        assert!(denied(index.verdict(&s, 3)));
        assert_eq!(index.verdict(&s, 1), EvictOutcome::Evicted);
        assert_eq!(
            index.verdict(&s, 2),
            EvictOutcome::Evicted,
            "other namespace"
        );
        assert_eq!(index.matched.len(), 3, "pods a and a-twin share one entry");
    }

    /// The index by first `matchLabels` pair finds exactly the budgets a scan of every selector
    /// would: several pairs, expressions only, an empty selector, other namespaces.
    #[test]
    fn indexed_budgets_match_like_a_scan() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let with = |ns: &str, name: &str, sel: LabelSelector| {
            let mut p = pdb(1);
            p.metadata.namespace = Some(ns.into());
            p.metadata.name = Some(name.into());
            if let Some(spec) = p.spec.as_mut() {
                spec.selector = Some(sel);
            }
            p
        };
        let labels = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let mut b = SnapshotBuilder::new();
        b.add_node(&node("n1").build()).ok();
        for (ns, name, pairs) in [
            ("ns", "fe", &[("app", "web"), ("tier", "fe")][..]),
            ("ns", "web", &[("app", "web")][..]),
            ("ns", "db", &[("app", "db")][..]),
            ("ns", "x", &[("x", "y")][..]),
            ("all", "z", &[("app", "web"), ("tier", "fe")][..]),
        ] {
            let mut p = pod(ns, name, "n1");
            for (k, v) in pairs {
                p = p.label(k, v);
            }
            b.add_pod(&p.build()).ok();
        }
        b.add_pdb(&with(
            "ns",
            "fe",
            LabelSelector {
                match_labels: labels(&[("app", "web"), ("tier", "fe")]),
                ..Default::default()
            },
        ));
        b.add_pdb(&with(
            "ns",
            "tier",
            LabelSelector {
                match_labels: labels(&[("tier", "fe")]),
                ..Default::default()
            },
        ));
        b.add_pdb(&with(
            "ns",
            "db-expr",
            LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "In".into(),
                    values: Some(vec!["db".into()]),
                }]),
                ..Default::default()
            },
        ));
        b.add_pdb(&with("all", "everything", LabelSelector::default()));
        let s = b.build();
        let index = BudgetIndex::new(&s);
        let mut sizes = std::collections::BTreeSet::new();
        for p in &s.pods {
            let scan: Vec<usize> = s
                .pdbs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.metadata.namespace.as_deref() == Some(&*p.namespace))
                .filter_map(|(i, b)| {
                    let sel =
                        kube_core::Selector::try_from(b.spec.as_ref()?.selector.clone()?).ok()?;
                    sel.matches(&p.labels).then_some(i)
                })
                .collect();
            let found = index.matching(&p.namespace, &p.labels);
            assert_eq!(found, scan, "{}/{}", p.namespace, p.name);
            sizes.insert(scan.len());
        }
        assert_eq!(
            sizes,
            [0, 1, 2].into(),
            "pods with none, one and two budgets"
        );
    }

    #[test]
    fn pdb_with_disruptions_allows() {
        assert_eq!(pdb_verdict(&snap(1), 0), EvictOutcome::Evicted);
    }
}
