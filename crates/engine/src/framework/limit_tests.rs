//! Plugins stop their analysis early under `maxNoOfPodsToEvictTotal` (lazily once it is reached,
//! in windows or batches while it may be): what they attempt and record must be exactly what an
//! unlimited run attempts, cut at the limit.

use super::cycle::{CycleConfig, Profile, run_cycle};
use crate::evictor::planner::PlanBackend;
use crate::snapshot::{PodId, Snapshot};
use crate::synth::{Shape, write_cluster};

const POLICY: &str = include_str!("../../../../benches/all-plugins-policy.yaml");
/// The policy's RemovePodsViolatingNodeAffinity types; each type is a pass of its own (with a
/// limit refusal of its own), so the test runs them one at a time.
const BOTH_TYPES: &str = r#"["requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"]"#;
const ONE_TYPE: [&str; 2] = [
    r#"["requiredDuringSchedulingIgnoredDuringExecution"]"#,
    r#"["preferredDuringSchedulingIgnoredDuringExecution"]"#,
];

fn cluster() -> Snapshot {
    let mut json = Vec::new();
    if let Err(e) = write_cluster(
        Shape {
            nodes: 40,
            pods: 1200,
            seed: 7,
        },
        &mut json,
    ) {
        panic!("synthetic cluster: {e}");
    }
    match crate::snapshot::load::load_bytes(&json) {
        Ok(s) => s,
        Err(e) => panic!("synthetic cluster: {e}"),
    }
}

/// The policy's profile `profile` with only its `plugin`-th plugin (Deschedule plugins first,
/// then Balance); `None` past the last one.
fn single_plugin(policy: &str, profile: usize, plugin: usize) -> Option<(Profile, String)> {
    let mut policy = match crate::policy::load_str(policy) {
        Ok(p) => p,
        Err(e) => panic!("policy: {e}"),
    };
    let mut p = policy.profiles.swap_remove(profile);
    let name;
    if plugin < p.deschedule.len() {
        let kept = p.deschedule.swap_remove(plugin);
        name = kept.name().to_string();
        p.deschedule = vec![kept];
        p.balance.clear();
    } else {
        let i = plugin - p.deschedule.len();
        if i >= p.balance.len() {
            return None;
        }
        let kept = p.balance.swap_remove(i);
        name = kept.name().to_string();
        p.deschedule.clear();
        p.balance = vec![kept];
    }
    Some((p, name))
}

/// Attempts (pod, moved) and limit refusals (pod) of one run.
type Run = (Vec<(PodId, bool)>, Vec<String>);

fn run(snapshot: &mut Snapshot, profile: Profile, max_total: Option<u32>) -> Run {
    snapshot.reset_evictions();
    let config = CycleConfig {
        max_total,
        ..CycleConfig::default()
    };
    let now = match "2026-02-01T00:00:00Z".parse() {
        Ok(t) => t,
        Err(e) => panic!("time: {e}"),
    };
    let (report, _) = run_cycle(
        &[profile],
        &config,
        snapshot,
        now,
        Box::new(PlanBackend::new()),
    );
    (
        report
            .records
            .iter()
            .map(|r| (r.pod, r.outcome.moves_pod()))
            .collect(),
        report
            .limit_hits
            .iter()
            .map(|h| format!("{}/{}", h.namespace, h.name))
            .collect(),
    )
}

#[test]
fn each_plugin_under_a_total_limit_attempts_an_unlimited_runs_prefix_and_records_the_next() {
    assert!(POLICY.contains(BOTH_TYPES));
    let mut snapshot = cluster();
    let mut checked = 0;
    for (variant, profile) in [(0, 0), (1, 0), (0, 1)] {
        let policy = POLICY.replace(BOTH_TYPES, ONE_TYPE[variant]);
        for plugin in 0.. {
            let Some((p, name)) = single_plugin(&policy, profile, plugin) else {
                break;
            };
            let (all, hits) = run(&mut snapshot, p, None);
            assert!(hits.is_empty(), "{name}: no limit, no refusals");
            let moved = all.iter().filter(|a| a.1).count() as u32;
            // 0: the limit is reached before the plugin starts; then a few cuts mid-run.
            for limit in [0, 1, moved / 3, moved.saturating_sub(1), moved] {
                let Some((p, _)) = single_plugin(&policy, profile, plugin) else {
                    unreachable!("the plugin exists");
                };
                let (attempts, hits) = run(&mut snapshot, p, Some(limit));
                // The attempts up to the `limit`-th pod moved, then the next attempt is refused.
                let mut cut = 0;
                let mut seen = 0;
                while cut < all.len() && seen < limit {
                    seen += u32::from(all[cut].1);
                    cut += 1;
                }
                assert_eq!(attempts, all[..cut], "{name} with limit {limit}");
                let next: Vec<String> = all
                    .get(cut)
                    .map(|&(pod, _)| {
                        let p = snapshot.pod(pod);
                        format!("{}/{}", p.namespace, p.name)
                    })
                    .into_iter()
                    .collect();
                assert_eq!(hits, next, "{name} with limit {limit}: the refused attempt");
            }
            checked += usize::from(moved > 0);
        }
    }
    assert!(checked >= 5, "only {checked} plugins evicted anything");
}
