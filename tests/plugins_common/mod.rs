//! Deschedule plugins for the tests that drive a cycle directly: they try pods without any
//! strategy of their own, so a test sees only what the evictor, the limits and the backend do.
#![allow(dead_code)]

use kube_descheduler::framework::cycle::{CycleConfig, Profile};
use kube_descheduler::framework::{DeschedulePlugin, Handle};
use kube_descheduler::plugins::default_evictor::DefaultEvictor;
use kube_descheduler::policy::Policy;
use kube_descheduler::snapshot::{NodeId, PodId};

/// Tries every pod that passes the filter, node by node, as upstream plugins do: a node limit
/// moves on to the next node, the total limit stops.
pub struct EvictAll;

impl DeschedulePlugin for EvictAll {
    fn name(&self) -> &'static str {
        "EvictAll"
    }
    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        try_each(h, nodes, |_, _| {});
    }
}

/// [`EvictAll`]'s walk: every pod on `nodes` in order, each first shown to `seen`, then tried
/// if it passes the filter; a node limit moves on to the next node, the total limit stops.
pub fn try_each(h: &mut Handle<'_>, nodes: &[NodeId], mut seen: impl FnMut(&Handle<'_>, PodId)) {
    'nodes: for &n in nodes {
        let pods: Vec<PodId> = h.snapshot.pods_on_node(n).collect();
        for p in pods {
            seen(h, p);
            if !h.filter(p) {
                continue;
            }
            match h.evict(p, None) {
                Err(e) if e.is_total_limit() => return,
                Err(e) if e.is_node_limit() => continue 'nodes,
                _ => {}
            }
        }
    }
}

/// Tries every pod that passes the filter, whatever each attempt answers (named `EvictAll` too).
pub struct TryEvery;

impl DeschedulePlugin for TryEvery {
    fn name(&self) -> &'static str {
        "EvictAll"
    }
    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        for &n in nodes {
            let pods: Vec<_> = h.snapshot.pods_on_node(n).collect();
            for p in pods {
                if h.filter(p) {
                    let _ = h.evict(p, None);
                }
            }
        }
    }
}

/// A policy of one profile `p`: the DefaultEvictor and [`TryEvery`], no limits.
pub fn try_every_policy() -> Policy {
    Policy {
        profiles: vec![Profile {
            name: "p".into(),
            evictor: Box::new(DefaultEvictor::default()),
            deschedule: vec![Box::new(TryEvery)],
            balance: vec![],
        }],
        cycle: CycleConfig::default(),
        grace_period_seconds: None,
        eviction_failure_event_notification: false,
        warnings: vec![],
        metrics: Default::default(),
    }
}
