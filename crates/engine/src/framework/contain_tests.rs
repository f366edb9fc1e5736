//! A misbehaving plugin: a panic fails only its own run, and wrong pod ids are errors.

use std::sync::Mutex;

use super::cycle::{CycleConfig, CycleReport};
use super::{DeschedulePlugin, Handle};
use crate::evictor::EvictError;
use crate::snapshot::{NodeId, PodId, Snapshot};
use crate::testing::{node, plan_cycle, pod, snapshot};

/// Evicts the first pod it finds, then panics.
struct Panicker;

impl DeschedulePlugin for Panicker {
    fn name(&self) -> &str {
        "Panicker"
    }
    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let first = nodes
            .iter()
            .flat_map(|&n| h.snapshot.pods_on_node(n))
            .next();
        if let Some(p) = first {
            let _ = h.evict(p, Some("first"));
        }
        panic!("boom at pod {first:?}");
    }
}

/// Evicts every pod it may.
struct EvictAll(String);

impl DeschedulePlugin for EvictAll {
    fn name(&self) -> &str {
        &self.0
    }
    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        for &n in nodes {
            let pods: Vec<PodId> = h.snapshot.pods_on_node(n).collect();
            for p in pods {
                if h.filter(p) {
                    let _ = h.evict(p, None);
                }
            }
        }
    }
}

/// Asks for pods that do not exist or moved already; records what the handle answered.
#[derive(Default)]
struct WrongIds(Mutex<Vec<String>>);

impl DeschedulePlugin for WrongIds {
    fn name(&self) -> &str {
        "WrongIds"
    }
    fn deschedule(&self, h: &mut Handle<'_>, _nodes: &[NodeId]) {
        let mut seen = Vec::new();
        let bad = PodId::MAX;
        seen.push(format!("{:?}", h.evict(bad, None)));
        seen.push(format!("{:?}", h.evict_prefiltered(bad, None)));
        seen.push(format!("filter {}", h.filter(bad)));
        seen.push(format!("pre {}", h.pre_eviction_filter(bad)));
        seen.push(format!("moved {}", h.is_moved(bad)));
        seen.push(format!("node limit {}", h.node_limit_reached(NodeId::MAX)));
        seen.push(format!("{:?}", h.evict(0, None).map(|_| ())));
        seen.push(format!("{:?}", h.evict(0, None)));
        if let Ok(mut s) = self.0.lock() {
            *s = seen;
        }
    }
}

fn cluster() -> crate::snapshot::Snapshot {
    snapshot(
        vec![node("n1").build(), node("n2").build()],
        vec![
            pod("a", "p1", "n1").build(),
            pod("a", "p2", "n1").build(),
            pod("a", "p3", "n2").build(),
        ],
    )
}

/// Plans one cycle of one profile with these Deschedule plugins.
fn plan(snap: &mut Snapshot, deschedule: Vec<Box<dyn DeschedulePlugin>>) -> CycleReport {
    let profiles = [crate::testing::profile(deschedule, vec![])];
    plan_cycle(&profiles, &CycleConfig::default(), snap)
}

#[test]
fn a_panic_fails_only_that_plugin_and_keeps_its_evictions() {
    let mut snap = cluster();
    let report = plan(
        &mut snap,
        vec![Box::new(Panicker), Box::new(EvictAll("After".into()))],
    );
    assert_eq!(
        report.plugin_failures.len(),
        1,
        "{:?}",
        report.plugin_failures
    );
    let f = &report.plugin_failures[0];
    assert_eq!((f.profile.as_str(), f.plugin.as_str()), ("p", "Panicker"));
    assert!(
        f.error.contains("the plugin panicked: boom at pod Some(0)"),
        "{}",
        f.error
    );
    // The eviction made before the panic stands (settled: the next plugin does not see p1), and
    // the next plugin ran.
    let by: Vec<(String, String)> = report
        .records
        .iter()
        .map(|r| (r.plugin.to_string(), r.name.to_string()))
        .collect();
    assert_eq!(
        by,
        [
            ("Panicker".to_string(), "p1".to_string()),
            ("After".to_string(), "p2".to_string()),
            ("After".to_string(), "p3".to_string()),
        ]
    );
    assert_eq!(report.timings.len(), 2);
}

#[test]
fn unknown_or_moved_pods_are_errors_not_panics() {
    let mut snap = cluster();
    let wrong = std::sync::Arc::new(WrongIds::default());
    struct Shared(std::sync::Arc<WrongIds>);
    impl DeschedulePlugin for Shared {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
            self.0.deschedule(h, nodes)
        }
    }
    let report = plan(&mut snap, vec![Box::new(Shared(wrong.clone()))]);
    assert!(
        report.plugin_failures.is_empty(),
        "{:?}",
        report.plugin_failures
    );
    let seen = wrong.0.lock().map(|s| s.clone()).unwrap_or_default();
    let unknown = format!("{:?}", Err::<(), _>(EvictError::UnknownPod(PodId::MAX)));
    assert_eq!(
        seen,
        [
            unknown.clone(),
            unknown,
            "filter false".to_string(),
            "pre false".to_string(),
            "moved false".to_string(),
            "node limit false".to_string(),
            "Ok(())".to_string(),
            "Err(AlreadyEvicted)".to_string(),
        ]
    );
    assert_eq!(report.records.len(), 1);
}
