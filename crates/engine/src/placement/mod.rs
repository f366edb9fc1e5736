//! The placement simulator: for a pod about to be evicted, predict the node
//! kube-scheduler would pick for its replacement (the same spec without a nodeName), on the cluster
//! as it will be — pods evicted this cycle gone, replacements predicted this cycle counted where
//! they were predicted to land — and, with the DefaultEvictor's `placement: Enforce`, refuse an
//! eviction whose pod would come straight back, fits nowhere, or would land on a node this cycle is
//! emptying.
//!
//! - [`profile`]: the scheduler profile modelled (default plugins, weights, scoring strategy).
//! - [`config`]: `--scheduler-config`, a `KubeSchedulerConfiguration` read strictly.
//! - [`state`]: the per-cycle node loads and selector counts, updated incrementally.
//! - [`terms`]: spread constraints and affinity terms as matchers; topology domains.
//! - [`predict`]: Filter, Score, the best node and its ties.
//! - [`scoring`]: the Score phase over the feasible nodes.
//! - [`plugin_scores`]: one Score plugin's scores in a prediction.
//! - [`ports`]: the NodePorts filter (host ports).
//! - [`matcher`]: which pods a selector picks; matchers and pods filed by the label value a
//!   selector requires.
//! - [`score`]: kube-scheduler's scoring arithmetic.
//! - `resources`: NodeResourcesFit's filter and the resource scores, remembered per pod shape.
//!
//! `docs/placement.md` lists what is modelled and every place the prediction differs from
//! kube-scheduler.

mod cache;
#[cfg(test)]
mod choose_tests;
pub mod config;
pub mod matcher;
pub mod plugin_scores;
#[cfg(test)]
mod pod_spec_tests;
pub mod ports;
pub mod predict;
pub mod profile;
mod resources;
pub mod score;
pub mod scoring;
mod spread_score;
pub mod state;
#[cfg(test)]
mod terminating_tests;
pub mod terms;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use rustc_hash::FxHashSet;
use serde::Deserialize;

pub use predict::{NodeScore, Prediction};
pub use profile::{SchedulerProfile, SchedulerProfiles};

use crate::snapshot::{NodeId, PodId, Snapshot};

/// The DefaultEvictor's `placement` argument. A YAML 1.1 reader turns a bare `Off` into the
/// boolean `false`; that is read as `Off` (and `true` is refused, naming the modes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ModeText")]
pub enum PlacementMode {
    /// No prediction (upstream behaviour).
    #[default]
    Off,
    /// Every eviction carries its prediction; decisions unchanged.
    Report,
    /// Evictions whose replacement would come back, fit nowhere or land on a node being emptied
    /// are refused.
    Enforce,
}

/// `placement` as written: a mode name, or the boolean a YAML 1.1 reader makes of a bare `Off`.
#[derive(Deserialize)]
#[serde(untagged)]
enum ModeText {
    Name(String),
    Flag(bool),
}

impl TryFrom<ModeText> for PlacementMode {
    type Error = String;

    fn try_from(v: ModeText) -> Result<Self, String> {
        match v {
            ModeText::Name(n) => match n.as_str() {
                "Off" => Ok(PlacementMode::Off),
                "Report" => Ok(PlacementMode::Report),
                "Enforce" => Ok(PlacementMode::Enforce),
                other => Err(format!(
                    "unknown variant `{other}`, expected one of `Off`, `Report`, `Enforce`"
                )),
            },
            ModeText::Flag(false) => Ok(PlacementMode::Off),
            ModeText::Flag(true) => {
                Err("expected one of `Off`, `Report`, `Enforce`, found the boolean true".into())
            }
        }
    }
}

/// Why `Enforce` refused an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalCode {
    /// The replacement would be scheduled back onto the pod's node (it wins or ties).
    PlacementReturn,
    /// No node passes the filters for the replacement.
    PlacementNoFit,
    /// The replacement would land on a node this cycle's plugins are emptying.
    PlacementTargetEmptied,
}

impl RefusalCode {
    /// The code as JSON, logs and metrics print it.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::PlacementReturn => "PlacementReturn",
            RefusalCode::PlacementNoFit => "PlacementNoFit",
            RefusalCode::PlacementTargetEmptied => "PlacementTargetEmptied",
        }
    }
}

/// A refusal: its code and the sentence with the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code.
    pub code: RefusalCode,
    /// Why, for people.
    pub message: String,
}

/// A node's score as reported: the node's name, its total and each plugin's weighted part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredNode {
    /// Node name.
    pub node: String,
    /// The score.
    pub score: NodeScore,
}

/// What an eviction record carries about its replacement (names resolved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlacementReport {
    /// The predicted node (`None`: no node fits, or not predicted).
    pub predicted_node: Option<String>,
    /// Nodes tied with it (itself included).
    pub ties: Vec<String>,
    /// The predicted node's score.
    pub best: Option<ScoredNode>,
    /// The pod's current node's score (`None`: it does not pass the filters).
    pub current: Option<ScoredNode>,
    /// The Filter plugin rejecting the current node, if any.
    pub current_filtered: Option<&'static str>,
    /// How many nodes pass the filters.
    pub feasible: usize,
    /// Why there is no prediction (e.g. no profile serves the pod's schedulerName).
    pub not_predicted: Option<String>,
    /// The replacement may come back to the pod's node (a tie includes it).
    pub may_return: bool,
    /// The refusal `Enforce` made (or, with `Report`, would make).
    pub refusal: Option<Refusal>,
}

impl PlacementReport {
    /// One line for tables and logs: `→ n3 (score 250; current n5 240)`.
    pub fn summary(&self) -> String {
        if let Some(why) = &self.not_predicted {
            return format!("not predicted: {why}");
        }
        let Some(node) = &self.predicted_node else {
            return "→ no node fits".to_string();
        };
        let mut s = format!("→ {node}");
        if self.ties.len() > 1 {
            s.push_str(&format!(" (tied with {})", self.ties.len() - 1));
        }
        if let Some(b) = &self.best {
            s.push_str(&format!(" score {}", b.score.total));
        }
        match &self.current {
            Some(c) => s.push_str(&format!("; {} {}", c.node, c.score.total)),
            None => {
                if let Some(f) = self.current_filtered {
                    s.push_str(&format!("; current node filtered by {f}"));
                }
            }
        }
        s
    }
}

/// The simulator of one cycle.
pub struct Simulator {
    profiles: Arc<SchedulerProfiles>,
    state: state::ClusterState,
    caches: predict::Caches,
}

impl Simulator {
    /// The cluster of `snapshot` with `moved` pods gone.
    pub fn new(
        snapshot: &Snapshot,
        moved: &FxHashSet<PodId>,
        profiles: Arc<SchedulerProfiles>,
    ) -> Self {
        Simulator {
            profiles,
            state: state::ClusterState::new(snapshot, moved),
            caches: predict::Caches::default(),
        }
    }

    /// Predicts the replacement of `pod`, taking `pod` off its node for the time being
    /// ([`Simulator::commit`] or [`Simulator::abandon`] must follow), with the profile serving the
    /// pod's `schedulerName` (kube-scheduler's profiles are selected the same way). `Err` (why):
    /// no profile serves it — another scheduler places such pods, so nothing is predicted, and
    /// the pod stays where it is in the simulated cluster.
    pub fn evaluate(&mut self, snapshot: &Snapshot, pod: PodId) -> Result<Prediction, String> {
        let scheduler_name = snapshot.pod(pod).scheduler_name();
        let profiles = self.profiles.clone();
        let Some(profile) = profiles.get(scheduler_name) else {
            return Err(format!(
                "no profile of the scheduler configuration serves schedulerName {scheduler_name:?}"
            ));
        };
        self.state.remove(snapshot, pod);
        Ok(predict::predict(
            snapshot,
            &mut self.state,
            &mut self.caches,
            profile,
            pod,
        ))
    }

    /// The pod left: its replacement lands on `target` (`None`: not predicted, or fits nowhere).
    pub fn commit(&mut self, snapshot: &Snapshot, pod: PodId, target: Option<NodeId>) {
        self.state.remove(snapshot, pod);
        if let Some(n) = target {
            self.state.place(snapshot, pod, n);
            self.caches.placed(snapshot, pod, n);
        }
    }

    /// The pod stays (refused or not evicted).
    pub fn abandon(&mut self, snapshot: &Snapshot, pod: PodId) {
        self.state.restore(snapshot, pod);
    }
}

/// Judges a prediction for `pod` (evicted by `plugin`): the report, with the refusal `Enforce`
/// makes. `emptying` are the nodes this cycle's node-usage plugins are emptying.
pub fn judge(
    snapshot: &Snapshot,
    pod: PodId,
    plugin: &str,
    prediction: Result<Prediction, String>,
    emptying: &FxHashSet<NodeId>,
) -> PlacementReport {
    let prediction = match prediction {
        Ok(p) => p,
        Err(why) => {
            return PlacementReport {
                not_predicted: Some(why),
                ..Default::default()
            };
        }
    };
    let mut report = scored_report(snapshot, pod, &prediction);
    report.refusal = refusal(snapshot, pod, plugin, &prediction, emptying);
    report
}

/// The report of a prediction for `pod`, without its refusal: the predicted node, the ties, and
/// the best and current nodes' scores.
fn scored_report(snapshot: &Snapshot, pod: PodId, prediction: &Prediction) -> PlacementReport {
    let name = |n: NodeId| snapshot.node(n).name.clone();
    let current = snapshot.pod(pod).node;
    PlacementReport {
        predicted_node: prediction.best.map(name),
        ties: prediction.ties.iter().map(|&n| name(n)).collect(),
        best: prediction
            .best
            .zip(prediction.best_score.clone())
            .map(|(n, score)| ScoredNode {
                node: name(n),
                score,
            }),
        current: current
            .zip(prediction.current_score.clone())
            .map(|(n, score)| ScoredNode {
                node: name(n),
                score,
            }),
        current_filtered: prediction.current_filtered,
        feasible: prediction.feasible,
        may_return: current.is_some_and(|c| prediction.may_land_on(c)),
        ..Default::default()
    }
}

/// The refusal `Enforce` makes of a prediction for `pod`: no node fits, the pod may come back to
/// its node, or it may land on a node being emptied.
fn refusal(
    snapshot: &Snapshot,
    pod: PodId,
    plugin: &str,
    prediction: &Prediction,
    emptying: &FxHashSet<NodeId>,
) -> Option<Refusal> {
    let Some(best) = prediction.best else {
        return Some(Refusal {
            code: RefusalCode::PlacementNoFit,
            message:
                "no node passes the scheduler's filters for the replacement: it would stay Pending"
                    .to_string(),
        });
    };
    let current = snapshot.pod(pod).node;
    if let Some(cur) = current.filter(|&c| prediction.may_land_on(c)) {
        return Some(return_refusal(snapshot, plugin, prediction, best, cur));
    }
    let &e = prediction.ties.iter().find(|n| emptying.contains(n))?;
    Some(Refusal {
        code: RefusalCode::PlacementTargetEmptied,
        message: format!(
            "would be scheduled onto {}, a node this cycle's node-usage plugins are emptying",
            snapshot.node(e).name
        ),
    })
}

/// The refusal of a replacement that may be scheduled back onto `cur`, its pod's node, with the
/// scores that bring it back (`best` is the best node).
fn return_refusal(
    snapshot: &Snapshot,
    plugin: &str,
    prediction: &Prediction,
    best: NodeId,
    cur: NodeId,
) -> Refusal {
    let name = |n: NodeId| snapshot.node(n).name.clone();
    let cur_name = name(cur);
    let cur_score = prediction.current_score.clone().unwrap_or_default();
    let versus = match &prediction.runner_up {
        Some((other, s)) => format!(
            "score {} on {cur_name} vs {} on {} ({} {} vs {})",
            cur_score.total,
            s.total,
            name(*other),
            prediction.strategy,
            cur_score.plugin("NodeResourcesFit"),
            s.plugin("NodeResourcesFit"),
        ),
        None => format!("{cur_name} is the only node that fits"),
    };
    let tie = if best != cur {
        " (tied with the best node)"
    } else {
        ""
    };
    let hint = if plugin == "HighNodeUtilization" && prediction.strategy == "LeastAllocated" {
        "; use MostAllocated in the scheduler configuration, or disable HighNodeUtilization"
    } else {
        ""
    };
    Refusal {
        code: RefusalCode::PlacementReturn,
        message: format!("would be scheduled back onto {cur_name}{tie}: {versus}{hint}"),
    }
}
