//! Where a Deployment's replicas are: which Ready replicas stay (on a schedulable node, not being
//! evicted) and how many pods sit on unschedulable (cordoned) nodes.
//!
//! Pure: the webhook fills [`Sibling`]s from its pod and node caches and its memory of recent
//! evictions; `plan` fills them from its snapshot. [`census`] reduces them for
//! [`super::decision::decide`].

/// One pod of the Deployment, as the census needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sibling {
    /// Pod name (same namespace as the Deployment).
    pub name: String,
    /// Condition Ready is True.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// The pod's node is cordoned (`spec.unschedulable`); `None` when unknown (no node yet, or
    /// the node could not be read), which counts as schedulable.
    pub node_unschedulable: Option<bool>,
    /// An eviction of this pod was seen recently (a drain is retrying it).
    pub being_evicted: bool,
}

/// What the guard knows about the replicas of the evicted pod's Deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaCensus {
    /// Ready, not terminating pods other than the evicted one.
    pub other_ready: u32,
    /// Of [`Self::other_ready`], those that stay: on a schedulable node and not being evicted.
    pub other_ready_staying: u32,
    /// Pods (not terminating) on unschedulable nodes, the evicted one included.
    pub on_unschedulable: u32,
}

/// Reduces the Deployment's pods to a census, leaving out `evicted` (the pod being evicted).
pub fn census<'a>(evicted: &str, pods: impl IntoIterator<Item = &'a Sibling>) -> ReplicaCensus {
    let mut c = ReplicaCensus::default();
    for p in pods {
        if p.terminating {
            continue;
        }
        let cordoned = p.node_unschedulable == Some(true);
        if cordoned {
            c.on_unschedulable += 1;
        }
        if p.name == evicted || !p.ready {
            continue;
        }
        c.other_ready += 1;
        if !cordoned && !p.being_evicted {
            c.other_ready_staying += 1;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sib(name: &str, ready: bool, cordoned: Option<bool>, evicting: bool) -> Sibling {
        Sibling {
            name: name.into(),
            ready,
            terminating: false,
            node_unschedulable: cordoned,
            being_evicted: evicting,
        }
    }

    #[test]
    fn census_table() {
        let me = "web-1";
        let cases: Vec<(&str, Vec<Sibling>, ReplicaCensus)> = vec![
            (
                "only the evicted pod (N = 1)",
                vec![sib(me, true, Some(true), true)],
                ReplicaCensus {
                    other_ready: 0,
                    other_ready_staying: 0,
                    on_unschedulable: 1,
                },
            ),
            (
                "all three on a cordoned node",
                vec![
                    sib(me, true, Some(true), false),
                    sib("web-2", true, Some(true), false),
                    sib("web-3", true, Some(true), false),
                ],
                ReplicaCensus {
                    other_ready: 2,
                    other_ready_staying: 0,
                    on_unschedulable: 3,
                },
            ),
            (
                "one sibling on a schedulable node stays",
                vec![
                    sib(me, true, Some(true), false),
                    sib("web-2", true, Some(false), false),
                    sib("web-3", true, Some(true), false),
                ],
                ReplicaCensus {
                    other_ready: 2,
                    other_ready_staying: 1,
                    on_unschedulable: 2,
                },
            ),
            (
                "a sibling being evicted elsewhere leaves too",
                vec![
                    sib(me, true, Some(false), true),
                    sib("web-2", true, Some(false), true),
                ],
                ReplicaCensus {
                    other_ready: 1,
                    other_ready_staying: 0,
                    on_unschedulable: 0,
                },
            ),
            (
                "unknown node counts as schedulable",
                vec![sib(me, true, None, false), sib("web-2", true, None, false)],
                ReplicaCensus {
                    other_ready: 1,
                    other_ready_staying: 1,
                    on_unschedulable: 0,
                },
            ),
            (
                "unready siblings are not replicas that serve",
                vec![
                    sib(me, true, Some(true), false),
                    sib("web-2", false, Some(false), false),
                ],
                ReplicaCensus {
                    other_ready: 0,
                    other_ready_staying: 0,
                    on_unschedulable: 1,
                },
            ),
            (
                "terminating pods are left out entirely",
                vec![
                    sib(me, true, Some(true), false),
                    Sibling {
                        terminating: true,
                        ..sib("web-2", true, Some(true), false)
                    },
                ],
                ReplicaCensus {
                    other_ready: 0,
                    other_ready_staying: 0,
                    on_unschedulable: 1,
                },
            ),
        ];
        for (what, pods, want) in cases {
            assert_eq!(census(me, &pods), want, "{what}");
        }
    }
}
