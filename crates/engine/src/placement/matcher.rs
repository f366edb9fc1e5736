//! Which pods a selector picks ([`Matcher`]: namespaces and a label selector), and finding the
//! matchers that may pick a pod, and the pods a matcher may pick, without trying every one: a selector with an `Equal` or `In` requirement only picks pods carrying one of its
//! values, so matchers and pods are filed under (namespace, label key, value). A lookup returns
//! candidates — a superset of the answer, deduplicated — that the caller still checks with
//! [`Matcher::picks`]; hashing the three strings to one number can only add candidates.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use kube_core::{Expression, Selector, SelectorExt};
use rustc_hash::{FxHashMap, FxHasher};

use crate::snapshot::{Pod, Snapshot};

/// Which namespaces a selector looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// These namespaces (a term's `namespaces`, or the owner's namespace).
    Listed(Vec<String>),
    /// The listed ones plus those whose labels a `namespaceSelector` (its text) matches.
    Selected(Vec<String>, String),
}

/// Picks pods: namespaces and a label selector.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Namespaces.
    pub namespaces: Namespaces,
    /// The namespace selector, compiled (with [`Namespaces::Selected`]).
    pub ns_selector: Option<Selector>,
    /// The label selector (`None`: a nil selector, picks nothing).
    pub selector: Option<Selector>,
    /// Terminating pods count: InterPodAffinity's terms count them, PodTopologySpread's
    /// constraints skip them (`podtopologyspread/common.go`).
    pub terminating: bool,
}

impl Matcher {
    /// A cache key: matchers with equal keys pick the same pods.
    pub fn key(&self) -> String {
        format!(
            "{:?}|{:?}|{}",
            self.namespaces, self.selector, self.terminating
        )
    }

    /// Whether `namespace` is looked at.
    pub fn namespace_ok(&self, snapshot: &Snapshot, namespace: &str) -> bool {
        match &self.namespaces {
            Namespaces::Listed(l) => l.iter().any(|n| n == namespace),
            Namespaces::Selected(l, _) => {
                l.iter().any(|n| n == namespace)
                    || self.ns_selector.as_ref().is_some_and(|s| {
                        let empty = BTreeMap::new();
                        s.matches(snapshot.namespace_labels(namespace).unwrap_or(&empty))
                    })
            }
        }
    }

    /// Whether the matcher picks `pod` (a terminating one only when it counts them).
    pub fn picks(&self, snapshot: &Snapshot, pod: &Pod) -> bool {
        // Cheapest test first (the result is the same conjunction).
        (self.terminating || !pod.is_terminating())
            && self.picks_labels(snapshot, &pod.namespace, &pod.labels)
    }

    /// Whether the matcher picks a pod of `namespace` labelled `labels` (not terminating, or
    /// [`Matcher::terminating`]).
    pub fn picks_labels(
        &self,
        snapshot: &Snapshot,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        self.namespace_ok(snapshot, namespace)
            && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// The label a selector requires, with its allowed values (`None`: no `Equal`/`In` requirement).
pub fn pin(selector: &Selector) -> Option<(String, Vec<String>)> {
    selector.clone().into_iter().find_map(|e| match e {
        Expression::Equal(k, v) => Some((k, vec![v])),
        Expression::In(k, vs) => Some((k, vs.into_iter().collect())),
        _ => None,
    })
}

/// The filing number of a pod label `key=value` in `namespace`.
fn slot(namespace: &str, key: &str, value: &str) -> u64 {
    let mut h = FxHasher::default();
    (namespace, key, value).hash(&mut h);
    h.finish()
}

/// Where a matcher is filed.
enum Filing {
    /// Under these slots.
    Pinned(Vec<u64>),
    /// Under these namespaces (no pin).
    Namespaces(Vec<String>),
    /// Looked at for every pod (a namespace selector).
    Everywhere,
    /// Nowhere: a nil selector picks nothing.
    Nowhere,
}

fn filing(m: &Matcher) -> Filing {
    let Some(selector) = &m.selector else {
        return Filing::Nowhere;
    };
    match (&m.namespaces, pin(selector)) {
        (Namespaces::Selected(..), _) => Filing::Everywhere,
        (Namespaces::Listed(l), Some((k, vs))) => Filing::Pinned(
            l.iter()
                .flat_map(|ns| vs.iter().map(|v| slot(ns, &k, v)))
                .collect(),
        ),
        (Namespaces::Listed(l), None) => Filing::Namespaces(l.clone()),
    }
}

/// Items (matchers' numbers, or placed pods) filed by slot and namespace.
#[derive(Default)]
struct Filed<T> {
    pinned: FxHashMap<u64, Vec<T>>,
    by_namespace: FxHashMap<String, Vec<T>>,
    everywhere: Vec<T>,
}

/// Matchers, numbered in the order they are added, filed so that those that may pick a pod are
/// found from its namespace and labels.
#[derive(Default)]
pub struct MatcherIndex(Filed<usize>);

impl MatcherIndex {
    /// Files matcher number `at` (numbers are added in increasing order).
    pub fn add(&mut self, at: usize, m: &Matcher) {
        // Within one call the same list may come up twice (a namespace listed twice, or two
        // slots hashing alike): it then already ends with `at`.
        let push = |list: &mut Vec<usize>| {
            if list.last() != Some(&at) {
                list.push(at);
            }
        };
        match filing(m) {
            Filing::Pinned(slots) => {
                for s in slots {
                    push(self.0.pinned.entry(s).or_default());
                }
            }
            Filing::Namespaces(l) => {
                for ns in l {
                    push(self.0.by_namespace.entry(ns).or_default());
                }
            }
            Filing::Everywhere => push(&mut self.0.everywhere),
            Filing::Nowhere => {}
        }
    }

    /// The matchers that may pick a pod of `namespace` labelled `labels`, ascending, each once.
    pub fn candidates(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<usize> {
        let mut out: Vec<usize> = labels
            .iter()
            .filter_map(|(k, v)| self.0.pinned.get(&slot(namespace, k, v)))
            .flatten()
            .chain(self.0.by_namespace.get(namespace).into_iter().flatten())
            .chain(&self.0.everywhere)
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Placed items (e.g. predicted replacements) filed by each of their labels and namespace, so a
/// matcher finds the ones it may pick.
#[derive(Default)]
pub struct PodIndex<T>(Filed<T>);

impl<T: Copy + Ord> PodIndex<T> {
    /// Files `item`, a pod of `namespace` labelled `labels`.
    pub fn add(&mut self, namespace: &str, labels: &BTreeMap<String, String>, item: T) {
        for (k, v) in labels {
            self.0
                .pinned
                .entry(slot(namespace, k, v))
                .or_default()
                .push(item);
        }
        self.0
            .by_namespace
            .entry(namespace.to_string())
            .or_default()
            .push(item);
        self.0.everywhere.push(item);
    }

    /// The items `m` may pick, ascending, each once.
    pub fn candidates(&self, m: &Matcher) -> Vec<T> {
        let mut out: Vec<T> = match filing(m) {
            Filing::Pinned(slots) => slots
                .iter()
                .filter_map(|s| self.0.pinned.get(s))
                .flatten()
                .copied()
                .collect(),
            Filing::Namespaces(l) => l
                .iter()
                .filter_map(|ns| self.0.by_namespace.get(ns))
                .flatten()
                .copied()
                .collect(),
            Filing::Everywhere => self.0.everywhere.clone(),
            Filing::Nowhere => Vec::new(),
        };
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::selector::{self, labels};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    fn matcher(namespaces: Namespaces, s: LabelSelector) -> Matcher {
        Matcher {
            namespaces,
            ns_selector: None,
            selector: selector::compile_strict(&s).ok(),
            terminating: false,
        }
    }

    fn listed(ns: &[&str]) -> Namespaces {
        Namespaces::Listed(ns.iter().map(|s| s.to_string()).collect())
    }

    fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(pairs)),
            ..Default::default()
        }
    }

    fn exists(key: &str) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: "Exists".into(),
                values: None,
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn candidates_are_a_superset_of_the_matchers_that_pick() {
        let matchers = [
            matcher(listed(&["a"]), match_labels(&[("app", "web")])),
            matcher(listed(&["a", "b", "a"]), match_labels(&[("app", "db")])),
            matcher(listed(&["a"]), exists("tier")),
            matcher(
                Namespaces::Selected(vec![], "x".into()),
                match_labels(&[("app", "web")]),
            ),
            Matcher {
                namespaces: listed(&["a"]),
                ns_selector: None,
                selector: None,
                terminating: false,
            },
        ];
        let mut index = MatcherIndex::default();
        for (i, m) in matchers.iter().enumerate() {
            index.add(i, m);
        }
        let cases = [
            ("a", labels(&[("app", "web")]), vec![0, 2, 3]),
            ("a", labels(&[("app", "db"), ("tier", "x")]), vec![1, 2, 3]),
            ("b", labels(&[("app", "db")]), vec![1, 3]),
            ("c", labels(&[("app", "web")]), vec![3]),
        ];
        for (ns, l, want) in cases {
            assert_eq!(index.candidates(ns, &l), want, "{ns} {l:?}");
        }
    }

    #[test]
    fn placed_pods_are_found_by_the_matchers_that_may_pick_them() {
        let mut placed = PodIndex::default();
        placed.add("a", &labels(&[("app", "web"), ("tier", "x")]), 1u32);
        placed.add("a", &labels(&[("app", "db")]), 2);
        placed.add("b", &labels(&[("app", "web")]), 3);
        let web_a = matcher(listed(&["a"]), match_labels(&[("app", "web")]));
        assert_eq!(placed.candidates(&web_a), vec![1]);
        let web_ab = matcher(listed(&["a", "b", "b"]), match_labels(&[("app", "web")]));
        assert_eq!(placed.candidates(&web_ab), vec![1, 3]);
        assert_eq!(
            placed.candidates(&matcher(listed(&["a"]), exists("tier"))),
            vec![1, 2]
        );
        let anywhere = matcher(
            Namespaces::Selected(vec![], "x".into()),
            match_labels(&[("app", "db")]),
        );
        assert_eq!(placed.candidates(&anywhere), vec![1, 2, 3]);
    }
}
