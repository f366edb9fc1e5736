//! The snapshot's PodDisruptionBudgets by namespace, as guard facts with their selectors parsed
//! once. Within a namespace, budgets are indexed by their first `matchLabels` pair (a parsed
//! selector requires every pair, so only pods with that label can match), so a pod is matched only
//! against the budgets that can select it: a cycle makes tens of thousands of attempts at 5,000
//! nodes, and a namespace can hold thousands of budgets.

use std::collections::BTreeMap;

use kube_core::SelectorExt;
use kube_descheduler_engine::snapshot::Snapshot;
use kube_descheduler_engine::workload::PdbFacts;
use rustc_hash::FxHashMap;

/// Every budget of a snapshot, in snapshot order, and the index over them.
pub struct BudgetIndex {
    /// The budgets as guard facts, by index into `snapshot.pdbs`.
    pub facts: Vec<PdbFacts>,
    by_namespace: FxHashMap<String, NamespaceBudgets>,
}

/// The budgets of one namespace.
#[derive(Default)]
struct NamespaceBudgets {
    /// Budgets with no `matchLabels` pair to index by: expressions only, an empty selector, or
    /// a selector that did not parse (it matches nothing).
    unindexed: Vec<usize>,
    /// Budgets by their first `matchLabels` pair (key, then value).
    by_label: FxHashMap<String, FxHashMap<String, Vec<usize>>>,
}

impl BudgetIndex {
    /// Indexes `snapshot.pdbs`.
    pub fn new(snapshot: &Snapshot) -> Self {
        let mut facts = Vec::with_capacity(snapshot.pdbs.len());
        let mut by_namespace: FxHashMap<String, NamespaceBudgets> = FxHashMap::default();
        for pdb in &snapshot.pdbs {
            let f = PdbFacts::from_pdb(pdb);
            let ns = by_namespace.entry(f.namespace.clone()).or_default();
            let first_pair = pdb
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(|sel| sel.match_labels.as_ref())
                .and_then(|m| m.iter().next())
                .filter(|_| f.selector.is_some());
            match first_pair {
                Some((k, v)) => ns
                    .by_label
                    .entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .push(facts.len()),
                None => ns.unindexed.push(facts.len()),
            }
            facts.push(f);
        }
        BudgetIndex {
            facts,
            by_namespace,
        }
    }

    /// Indexes of the budgets of `namespace` that may select a pod with `labels`, in snapshot
    /// order: a superset of [`Self::matching`].
    pub fn candidates(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<usize> {
        let Some(ns) = self.by_namespace.get(namespace) else {
            return Vec::new();
        };
        let mut out = ns.unindexed.clone();
        for (k, v) in labels {
            if let Some(list) = ns.by_label.get(k).and_then(|m| m.get(v)) {
                out.extend_from_slice(list);
            }
        }
        out.sort_unstable();
        out
    }

    /// Indexes of the budgets of `namespace` whose selector matches `labels`, in snapshot order.
    /// A budget without a selector, or with one that does not parse, matches no pod (as the API
    /// server's budget lookup).
    pub fn matching(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<usize> {
        let mut out = self.candidates(namespace, labels);
        out.retain(|&i| {
            self.facts[i]
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(labels))
        });
        out
    }
}
