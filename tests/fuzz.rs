//! A short fuzz run of every target (seconds): structured and mutated inputs to each decoder
//! and parser that reads outside data must never panic, and every target must accept some of
//! its inputs (so the generators reach past the first check). The long run is
//! `cargo bench --bench fuzz` (see docs/limits-and-failures.md, "Fuzzing").

mod fuzz_common;

use fuzz_common::{describe, engine, targets};

fn short_run(name: &str, inputs: u64) {
    let target = targets::all()
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no target {name}"));
    let inputs = std::env::var("FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(inputs);
    let report = engine::fuzz(&target, inputs, 0x5eed);
    println!("{}", describe(&report));
    assert!(report.panics.is_empty(), "{}", describe(&report));
    assert!(
        report.accepted > 0,
        "no input accepted: {}",
        describe(&report)
    );
}

#[test]
fn policy_v1alpha2() {
    short_run("policy_v1alpha2", 1500);
}

#[test]
fn policy_v1alpha1() {
    short_run("policy_v1alpha1", 1500);
}

#[test]
fn snapshot() {
    short_run("snapshot", 300);
}

#[test]
fn admission_review() {
    short_run("admission_review", 2000);
}

#[test]
fn trigger_query() {
    short_run("trigger_query", 5000);
}

#[test]
fn quantity() {
    short_run("quantity", 5000);
}

#[test]
fn go_duration() {
    short_run("go_duration", 5000);
}

#[test]
fn kubeconfig() {
    short_run("kubeconfig", 500);
}

#[test]
fn every_target_has_a_short_run() {
    let names: Vec<_> = targets::all().iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "policy_v1alpha2",
            "policy_v1alpha1",
            "snapshot",
            "admission_review",
            "trigger_query",
            "quantity",
            "go_duration",
            "kubeconfig"
        ]
    );
}
