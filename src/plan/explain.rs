//! `plan --explain NAMESPACE/POD` and `--explain-node NODE`: why a pod was (not) evicted and how a
//! node stands against every threshold. Nothing here runs unless asked: the pod's checks are
//! evaluated for the named pods only, before the cycle (on the cluster as the plan starts), and
//! matched with the plan's records after it.

use std::fmt::Write as _;

use jiff::Timestamp;
use serde::Serialize;

use super::Plan;
use kube_descheduler_engine::evictor::LimitHit;
use kube_descheduler_engine::framework::cycle::ready_nodes;
use kube_descheduler_engine::plugins::default_evictor::DefaultEvictor;
use kube_descheduler_engine::policy::Policy;
use kube_descheduler_engine::scheduling::fit::{Misfit, PodFit};
use kube_descheduler_engine::snapshot::{NodeId, PodId, Snapshot};

/// What one plugin made of the pod.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginVerdict {
    /// Plugin.
    pub plugin: String,
    /// `selected` (an eviction was attempted), `limit` (a limit refused it), `placement`
    /// (`placement: Enforce` refused it), `moved-earlier`, `filtered` (the profile's evictor
    /// stopped it) or `not-selected`.
    pub verdict: &'static str,
    /// The sentence.
    pub detail: String,
}

/// One profile's view of the pod.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProfileExplanation {
    /// Profile.
    pub profile: String,
    /// The profile's evictor: `DefaultEvictor`, a custom evictor's registered name, or the
    /// names of several joined with `+`.
    pub evictor: String,
    /// Every Filter rule of the profile's evictor the pod fails (empty: it passes).
    pub filter: Vec<String>,
    /// Why the PreEvictionFilter (nodeFit, namespaceLabelSelector) rejects the pod, if it does.
    pub pre_eviction_filter: Option<String>,
    /// Per plugin, in run order.
    pub plugins: Vec<PluginVerdict>,
}

/// The answer for one pod.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    /// `namespace/name` as asked.
    pub pod: String,
    /// The pod's node (empty when unbound or not found).
    pub node: String,
    /// Set when the snapshot has no such pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_found: Option<String>,
    /// PodDisruptionBudgets selecting the pod, with their allowed disruptions.
    pub pdbs: Vec<String>,
    /// Per profile.
    pub profiles: Vec<ProfileExplanation>,
}

/// Looks up `namespace/name`.
fn find_pod(snapshot: &Snapshot, key: &str) -> Result<PodId, String> {
    let Some((ns, name)) = key.split_once('/') else {
        return Err(format!("--explain {key:?}: expected NAMESPACE/POD"));
    };
    snapshot
        .pods_in_namespace(ns)
        .find(|&p| snapshot.pod(p).name == name)
        .ok_or_else(|| format!("no pod {name} in namespace {ns} in the snapshot"))
}

/// The first predicate that fails on `node` for the pod, in words.
fn misfit_text(snapshot: &Snapshot, fit: &PodFit<'_>, pod: PodId, node: NodeId) -> Option<String> {
    let n = snapshot.node(node);
    let first = fit.misfits(node).into_iter().next()?;
    Some(match first {
        Misfit::Unschedulable => format!("{} is cordoned (unschedulable)", n.name),
        Misfit::Selector => format!(
            "{}: nodeSelector / required node affinity does not match",
            n.name
        ),
        Misfit::Taint => {
            let p = snapshot.pod(pod);
            let taint = n
                .taints
                .iter()
                .find(|t| {
                    kube_descheduler_engine::scheduling::taints::is_scheduling_taint(t)
                        && !kube_descheduler_engine::scheduling::taints::tolerates_all(
                            &p.tolerations,
                            std::slice::from_ref(*t),
                            kube_descheduler_engine::scheduling::taints::is_scheduling_taint,
                        )
                })
                .map(|t| match &t.value {
                    Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
                    _ => format!("{}:{}", t.key, t.effect),
                })
                .unwrap_or_default();
            format!("{}: taint not tolerated {taint}", n.name)
        }
        Misfit::AntiAffinity => format!(
            "{}: the pod's required anti-affinity selects a pod there",
            n.name
        ),
        Misfit::Resource(r) => format!("{}: insufficient {r}", n.name),
    })
}

/// Why the PreEvictionFilter rejects the pod in `profile`, or `None`.
fn pre_eviction(
    snapshot: &Snapshot,
    profile: &kube_descheduler_engine::framework::cycle::Profile,
    pod: PodId,
) -> Option<String> {
    let ev = default_evictor(profile)?;
    let candidates = if ev.args().node_fit {
        ev.node_fit_candidates(snapshot)
    } else {
        Vec::new()
    };
    if ev.pre_eviction_filter_with(snapshot, pod, &candidates) {
        return None;
    }
    if ev.args().node_fit {
        let fit = PodFit::new(snapshot, pod);
        let own = snapshot.pod(pod).node;
        let others: Vec<NodeId> = candidates.into_iter().filter(|&n| Some(n) != own).collect();
        if !others.iter().any(|&n| fit.fits(n)) {
            let mut tried: Vec<String> = others
                .iter()
                .take(3)
                .filter_map(|&n| misfit_text(snapshot, &fit, pod, n))
                .collect();
            if others.len() > 3 {
                tried.push(format!("… {} more nodes", others.len() - 3));
            }
            return Some(if others.is_empty() {
                "nodeFit: no other Ready node matches the evictor's nodeSelector".to_string()
            } else {
                format!("nodeFit: fits no other node — {}", tried.join("; "))
            });
        }
    }
    Some(format!(
        "namespaceLabelSelector: namespace {} does not match",
        snapshot.pod(pod).namespace
    ))
}

/// The profile's DefaultEvictor (alone, or among the profile's evictors), if it has one.
fn default_evictor(
    profile: &kube_descheduler_engine::framework::cycle::Profile,
) -> Option<&DefaultEvictor> {
    profile.evictor.as_any().downcast_ref::<DefaultEvictor>()
}

fn pdbs_of(snapshot: &Snapshot, pod: PodId) -> Vec<String> {
    let p = snapshot.pod(pod);
    snapshot
        .pdbs
        .iter()
        .filter(|pdb| {
            pdb.metadata.namespace.as_deref().unwrap_or("default") == &*p.namespace
                && pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .is_some_and(|sel| {
                        kube_descheduler_engine::scheduling::selector::matches(sel, &p.labels)
                    })
        })
        .map(|pdb| {
            let allowed = pdb
                .status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
                .map_or("unknown (no status)".to_string(), |n| n.to_string());
            format!(
                "PodDisruptionBudget {}/{}: disruptionsAllowed {allowed}",
                p.namespace,
                pdb.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// Per profile, per plugin (in run order): the plugin's own explanation.
type OwnExplanations = Vec<Vec<Option<String>>>;

/// The checks of the named pods, on the cluster as the plan starts (call before the cycle).
pub struct Prepared {
    answers: Vec<(Option<PodId>, PodExplanation, OwnExplanations)>,
}

/// Evaluates the DefaultEvictor and each plugin's own explanation for `pods` before the cycle.
pub fn prepare(policy: &Policy, snapshot: &Snapshot, now: Timestamp, pods: &[String]) -> Prepared {
    let nodes = ready_nodes(snapshot, policy.cycle.node_selector.as_ref());
    let answers = pods
        .iter()
        .map(|key| match find_pod(snapshot, key) {
            Err(e) => (
                None,
                PodExplanation {
                    pod: key.clone(),
                    node: String::new(),
                    not_found: Some(e),
                    pdbs: Vec::new(),
                    profiles: Vec::new(),
                },
                Vec::new(),
            ),
            Ok(pod) => {
                let p = snapshot.pod(pod);
                let mut own = Vec::new();
                let profiles = policy
                    .profiles
                    .iter()
                    .map(|pr| {
                        let mine: Vec<Option<String>> = pr
                            .deschedule
                            .iter()
                            .map(|pl| pl.explain_pod(snapshot, pod, &nodes, now))
                            .chain(
                                pr.balance
                                    .iter()
                                    .map(|pl| pl.explain_pod(snapshot, pod, &nodes, now)),
                            )
                            .collect();
                        own.push(mine);
                        ProfileExplanation {
                            profile: pr.name.clone(),
                            evictor: pr.evictor.name().to_string(),
                            filter: pr.evictor.explain_filter(snapshot, pod, now),
                            pre_eviction_filter: pre_eviction(snapshot, pr, pod),
                            plugins: Vec::new(),
                        }
                    })
                    .collect();
                (
                    Some(pod),
                    PodExplanation {
                        pod: key.clone(),
                        node: p.node_name.as_deref().unwrap_or_default().to_string(),
                        not_found: None,
                        pdbs: pdbs_of(snapshot, pod),
                        profiles,
                    },
                    own,
                )
            }
        })
        .collect();
    Prepared { answers }
}

/// Completes the answers with what the plan did.
pub fn finish(
    prepared: Prepared,
    policy: &Policy,
    plan: &Plan,
    limit_hits: &[LimitHit],
) -> Vec<PodExplanation> {
    prepared
        .answers
        .into_iter()
        .map(|(pod, mut answer, own)| {
            if pod.is_none() {
                return answer;
            }
            let (ns, name) = answer.pod.split_once('/').unwrap_or_default();
            let records = PodRecords::of(plan, limit_hits, ns, name);
            for ((pr, expl), own) in policy.profiles.iter().zip(&mut answer.profiles).zip(&own) {
                let names = pr
                    .deschedule
                    .iter()
                    .map(|p| p.name())
                    .chain(pr.balance.iter().map(|p| p.name()));
                for (plugin, own) in names.zip(own) {
                    let (verdict, detail) = records.verdict(pr.name.as_str(), plugin, expl, own);
                    expl.plugins.push(PluginVerdict {
                        plugin: plugin.to_string(),
                        verdict,
                        detail,
                    });
                }
            }
            answer
        })
        .collect()
}

/// What the plan recorded about one pod: its eviction attempts, the one that moved it, and the
/// limit hits and placement refusals that name it.
struct PodRecords<'a> {
    ns: &'a str,
    name: &'a str,
    attempts: Vec<&'a super::PlannedEviction>,
    moved_by: Option<&'a super::PlannedEviction>,
    limit_hits: &'a [LimitHit],
    placement_refusals: &'a [super::refusals::PlacementRefusal],
}

impl<'a> PodRecords<'a> {
    /// The records of pod `ns/name` in `plan`.
    fn of(plan: &'a Plan, limit_hits: &'a [LimitHit], ns: &'a str, name: &'a str) -> Self {
        let attempts: Vec<&super::PlannedEviction> = plan
            .evictions
            .iter()
            .filter(|e| *e.namespace == *ns && e.name == name)
            .collect();
        let moved_by = attempts
            .iter()
            .find(|e| e.outcome == "evicted" || e.outcome == "deflected")
            .copied();
        PodRecords {
            ns,
            name,
            attempts,
            moved_by,
            limit_hits,
            placement_refusals: &plan.placement_refusals,
        }
    }

    /// Whether `a_ns/a_name` is this pod.
    fn same(&self, a_ns: &str, a_name: &str) -> bool {
        a_ns == self.ns && a_name == self.name
    }

    /// What `plugin` of `profile` made of the pod, in the order of precedence: an attempt, a
    /// placement refusal, a limit hit, an earlier move, the evictor's filters, then the plugin's
    /// own explanation (`own`).
    fn verdict(
        &self,
        profile: &str,
        plugin: &str,
        expl: &ProfileExplanation,
        own: &Option<String>,
    ) -> (&'static str, String) {
        let attempt = self
            .attempts
            .iter()
            .find(|e| &*e.profile == profile && &*e.plugin == plugin);
        let hit = self.limit_hits.iter().find(|h| {
            self.same(&h.namespace, &h.name) && &*h.profile == profile && &*h.plugin == plugin
        });
        let refused = self.placement_refusals.iter().find(|r| {
            self.same(&r.namespace, &r.name) && r.profile == profile && r.plugin == plugin
        });
        if let Some(e) = attempt {
            ("selected", selected_detail(e))
        } else if let Some(r) = refused {
            (
                "placement",
                format!(
                    "selected ({}), but refused by placement: Enforce ({}): {}",
                    r.reason, r.code, r.message
                ),
            )
        } else if let Some(h) = hit {
            ("limit", format!("selected, but not attempted: {}", h.limit))
        } else if let Some(e) = self.moved_by {
            (
                "moved-earlier",
                format!(
                    "not considered: already moved by {} ({})",
                    e.plugin, e.profile
                ),
            )
        } else {
            unselected_verdict(expl, own)
        }
    }
}

/// The detail of an attempted eviction: the reason, the outcome, the guard's message and the
/// predicted placement.
fn selected_detail(e: &super::PlannedEviction) -> String {
    let mut d = format!("selected: {} → {}", e.reason.text, e.outcome);
    if let Some(m) = &e.message {
        let _ = write!(d, " ({m})");
    }
    if let Some(p) = &e.placement {
        let _ = write!(d, " [placement {}]", p.summary());
        if let Some(r) = &p.refusal {
            let _ = write!(
                d,
                "; placement: Enforce would refuse it ({}): {}",
                r.code.as_str(),
                r.message
            );
        }
    }
    d
}

/// Why a pod the plugin never selected stayed: the evictor's Filter, its PreEvictionFilter, or
/// the plugin's own explanation (`own`).
fn unselected_verdict(expl: &ProfileExplanation, own: &Option<String>) -> (&'static str, String) {
    if !expl.filter.is_empty() {
        (
            "filtered",
            format!(
                "not considered: {}: {}",
                expl.evictor,
                expl.filter.join("; ")
            ),
        )
    } else if let Some(pre) = &expl.pre_eviction_filter {
        (
            "filtered",
            format!(
                "would not be evicted: {} PreEvictionFilter: {pre}",
                expl.evictor
            ),
        )
    } else {
        (
            "not-selected",
            match own {
                Some(why) => format!("not selected: {why}"),
                None => "not selected (the plugin gives no per-pod explanation)".to_string(),
            },
        )
    }
}

/// The answers as text.
pub fn render_pods(answers: &[PodExplanation]) -> String {
    let mut out = String::new();
    for a in answers {
        let _ = writeln!(
            out,
            "explain {} (node {}):",
            a.pod,
            if a.node.is_empty() { "-" } else { &a.node }
        );
        if let Some(e) = &a.not_found {
            let _ = writeln!(out, "  {e}");
            continue;
        }
        for pdb in &a.pdbs {
            let _ = writeln!(out, "  {pdb}");
        }
        for p in &a.profiles {
            let _ = writeln!(out, "  profile {}:", p.profile);
            if p.filter.is_empty() {
                let _ = writeln!(out, "    {} Filter: passes", p.evictor);
            } else {
                let _ = writeln!(
                    out,
                    "    {} Filter stops it: {}",
                    p.evictor,
                    p.filter.join("; ")
                );
            }
            if let Some(pre) = &p.pre_eviction_filter {
                let _ = writeln!(out, "    {} PreEvictionFilter stops it: {pre}", p.evictor);
            }
            let filtered = p.plugins.iter().filter(|v| v.verdict == "filtered").count();
            for v in p.plugins.iter().filter(|v| v.verdict != "filtered") {
                let _ = writeln!(out, "    {}: {}", v.plugin, v.detail);
            }
            if filtered > 0 {
                let _ = writeln!(
                    out,
                    "    {filtered} plugin(s) not considered because of the {}: {}",
                    p.evictor,
                    p.plugins
                        .iter()
                        .filter(|v| v.verdict == "filtered")
                        .map(|v| v.plugin.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    out
}

/// One node against one node-usage plugin's levels.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplanation {
    /// Node.
    pub node: String,
    /// `profile/plugin`, or empty when no node-usage plugin considered the node.
    pub plugin: String,
    /// The sentence per resource and the class.
    pub lines: Vec<String>,
}

/// `--explain-node NODE`: usage per resource against every level of every node-usage plugin run,
/// and the class before and after the plan.
pub fn explain_node(plan: &Plan, snapshot: &Snapshot, node: &str) -> Vec<NodeExplanation> {
    use kube_descheduler_engine::evictor::reason::percent;
    let mut out = Vec::new();
    for t in &plan.node_usage {
        let Some(row) = t.nodes.iter().find(|r| r.node == node) else {
            continue;
        };
        let mut lines = Vec::new();
        for r in &t.resources {
            let b = row.before.percent.get(r).copied().flatten();
            let a = row.after.percent.get(r).copied().flatten();
            let fmt = |v: Option<f64>| v.map_or("- (node lacks it)".to_string(), percent);
            let mut line = format!("{r}: {} → {} after the plan", fmt(b), fmt(a));
            let v = b.unwrap_or(0.0);
            if let Some(&l) = t.low.get(r) {
                let cmp = if v <= l { "<=" } else { ">" };
                let _ = write!(
                    line,
                    "; low {}: {} {cmp} {}",
                    percent(l),
                    percent(v),
                    percent(l)
                );
            }
            if let Some(&h) = t.high.get(r) {
                let cmp = if v > h { ">" } else { "<=" };
                let _ = write!(
                    line,
                    "; high {}: {} {cmp} {}",
                    percent(h),
                    percent(v),
                    percent(h)
                );
            }
            lines.push(line);
        }
        lines.push(format!(
            "class: {} before, {} after ({} pods moved off)",
            row.before.class.as_str(),
            row.after.class.as_str(),
            row.moved_pods
        ));
        out.push(NodeExplanation {
            node: node.to_string(),
            plugin: format!("{}/{}", t.profile, t.plugin),
            lines,
        });
    }
    if out.is_empty() {
        let why = match snapshot.node_id(node) {
            None => format!("no node {node} in the snapshot"),
            Some(n) if !snapshot.node(n).ready => {
                format!("{node} is not Ready: no plugin considers it")
            }
            Some(_) if plan.node_usage.is_empty() => {
                "no node-usage plugin (LowNodeUtilization / HighNodeUtilization) ran".to_string()
            }
            Some(_) => format!("{node} does not match the policy's nodeSelector"),
        };
        out.push(NodeExplanation {
            node: node.to_string(),
            plugin: String::new(),
            lines: vec![why],
        });
    }
    out
}

/// The node answers as text.
pub fn render_nodes(answers: &[NodeExplanation]) -> String {
    let mut out = String::new();
    for a in answers {
        if a.plugin.is_empty() {
            let _ = writeln!(out, "explain node {}:", a.node);
        } else {
            let _ = writeln!(out, "explain node {} ({}):", a.node, a.plugin);
        }
        for l in &a.lines {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
