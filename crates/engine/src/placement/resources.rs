//! The resource part of a prediction, remembered per resource shape: NodeResourcesFit's filter and
//! the NodeResourcesFit and NodeResourcesBalancedAllocation scores of every node, for one pod
//! shape's requests under one profile. They read nothing but the node's load, and each eviction or
//! placement changes the load of one node, so a shape seen again is brought up to date by
//! recomputing only the nodes whose load changed since (the cluster state's change log). The pods
//! of an owner — and of many owners — share their requests: on the bench cluster ~2,000
//! predictions use a few hundred shapes.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::profile::{SchedulerProfile, ScoringStrategy};
use super::score::{self, ResourceUse};
use super::state::{ClusterState, ResKey, nonzero};
use crate::snapshot::resources::{PODS, Resources};
use crate::snapshot::{Pod, Snapshot};

/// At most this many shapes are remembered (about 25 KB each at 5,000 nodes); past it the memory
/// starts over, and a new shape costs one full computation, as without the memory.
const MAX_SHAPES: usize = 1024;

/// A resource a score reads: its name, its weight, the pod's amount, and whether the node's
/// requests are summed with the non-zero defaults (cpu and memory for NodeResourcesFit).
type ScoredResource = (String, i64, i64, bool);

/// What the resource verdicts of a shape depend on, besides the node loads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ShapeInputs {
    /// The pod's positive requests other than pods (NodeResourcesFit's filter).
    wants: Vec<(String, i64)>,
    /// NodeResourcesFit's strategy and resources (`None`: weight 0, not scored).
    fit: Option<(ScoringStrategy, Vec<ScoredResource>)>,
    /// NodeResourcesBalancedAllocation's resources (`None`: weight 0).
    balanced: Option<Vec<ScoredResource>>,
    /// NodeResourcesBalancedAllocation scores the change in balance (kube-scheduler 1.36+).
    balanced_change: bool,
}

impl ShapeInputs {
    fn of(profile: &SchedulerProfile, p: &Pod) -> Self {
        let (pod_cpu, pod_mem) = nonzero(p);
        let fit = (profile.weights.node_resources_fit > 0).then(|| {
            let resources = profile
                .fit_resources
                .iter()
                .map(|(name, weight)| match ResKey::of(name) {
                    ResKey::Cpu => (name.clone(), *weight, pod_cpu, true),
                    ResKey::Memory => (name.clone(), *weight, pod_mem, true),
                    key => (name.clone(), *weight, key.get(&p.requests), false),
                })
                .collect();
            (profile.strategy.clone(), resources)
        });
        let balanced = (profile.weights.balanced_allocation > 0).then(|| {
            profile
                .balanced_resources
                .iter()
                .map(|(name, weight)| {
                    (
                        name.clone(),
                        *weight,
                        ResKey::of(name).get(&p.requests),
                        false,
                    )
                })
                .collect()
        });
        ShapeInputs {
            wants: p
                .requests
                .names()
                .filter(|&name| name != PODS)
                .map(|name| (name.to_string(), p.requests.get(name)))
                .filter(|&(_, want)| want > 0)
                .collect(),
            fit,
            balanced,
            balanced_change: profile.balanced_change,
        }
    }
}

/// Per node, the resource verdicts of one shape.
pub struct ResourceView {
    /// NodeResourcesFit's filter passes: a free pod slot and room for every request.
    pub fits: Vec<bool>,
    /// NodeResourcesFit's score (0 when the profile does not score it).
    pub fit: Vec<i16>,
    /// NodeResourcesBalancedAllocation's score (0 when the profile does not score it).
    pub balanced: Vec<i16>,
    inputs: ShapeInputs,
    /// How much of the state's change log the view reflects.
    seen: usize,
}

/// The views of the shapes seen this cycle.
#[derive(Default)]
pub struct ResourceMemo {
    views: FxHashMap<(String, Arc<Resources>), ResourceView>,
    buf: Vec<ResourceUse>,
}

impl ResourceMemo {
    /// The resource verdicts of `p`'s shape under `profile`, up to date with `state`.
    pub fn view(
        &mut self,
        snapshot: &Snapshot,
        state: &ClusterState,
        profile: &SchedulerProfile,
        p: &Pod,
    ) -> &ResourceView {
        let key = (profile.scheduler_name.clone(), p.requests.clone());
        let inputs = ShapeInputs::of(profile, p);
        let n_nodes = snapshot.nodes.len();
        let log = state.changed();
        if self.views.len() >= MAX_SHAPES && !self.views.contains_key(&key) {
            self.views.clear();
        }
        let buf = &mut self.buf;
        let view = self.views.entry(key).or_insert_with(|| ResourceView {
            fits: Vec::new(),
            fit: Vec::new(),
            balanced: Vec::new(),
            inputs: inputs.clone(),
            seen: 0,
        });
        let stale = log.len() - view.seen.min(log.len());
        if view.inputs != inputs || view.fits.len() != n_nodes || stale > n_nodes / 4 {
            // New, or another profile of the same name, or most nodes changed: every node.
            view.inputs = inputs;
            view.fits.resize(n_nodes, false);
            view.fit.resize(n_nodes, 0);
            view.balanced.resize(n_nodes, 0);
            for n in 0..n_nodes {
                view.compute(snapshot, state, n, buf);
            }
        } else {
            for &n in &log[view.seen..] {
                view.compute(snapshot, state, n as usize, buf);
            }
        }
        view.seen = log.len();
        view
    }
}

impl ResourceView {
    /// Node `n`'s verdicts from its load now.
    fn compute(
        &mut self,
        snapshot: &Snapshot,
        state: &ClusterState,
        n: usize,
        buf: &mut Vec<ResourceUse>,
    ) {
        let (Some(load), Some(node)) = (state.loads.get(n), snapshot.nodes.get(n)) else {
            return;
        };
        let allocatable = &node.allocatable;
        let inputs = &self.inputs;
        self.fits[n] = allocatable.pods - load.pods > 0
            && inputs.wants.iter().all(|(name, want)| {
                let key = ResKey::of(name);
                *want <= key.get(allocatable) - key.get(&load.requested)
            });
        // Both scores are 0–100 by construction; the narrow type keeps a shape's view small.
        let narrow = |s: i64| s.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16;
        let uses = |resources: &[ScoredResource], with_pod: bool, buf: &mut Vec<ResourceUse>| {
            buf.clear();
            buf.extend(
                resources
                    .iter()
                    .map(|(name, weight, pod_amount, with_nonzero)| {
                        // Requested (the pod included; with the non-zero defaults where asked).
                        let key = ResKey::of(name);
                        let on_node = match (key, with_nonzero) {
                            (ResKey::Cpu, true) => load.nonzero_cpu,
                            (ResKey::Memory, true) => load.nonzero_memory,
                            _ => key.get(&load.requested),
                        };
                        ResourceUse {
                            requested: on_node + if with_pod { *pod_amount } else { 0 },
                            allocatable: key.get(allocatable),
                            weight: *weight,
                        }
                    }),
            );
        };
        if let Some((strategy, resources)) = &inputs.fit {
            uses(resources, true, buf);
            self.fit[n] = narrow(score::fit_score(strategy, buf));
        }
        if let Some(resources) = &inputs.balanced {
            uses(resources, true, buf);
            let with_pod = score::balanced_score(buf);
            self.balanced[n] = narrow(if inputs.balanced_change {
                uses(resources, false, buf);
                score::balanced_change(with_pod, score::balanced_score(buf))
            } else {
                with_pod
            });
        }
    }
}
