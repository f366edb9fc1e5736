//! Dry-run evictions: allowed, with a warning saying what the guard would have done.

use super::*;

/// The verdict on a dry-run eviction of the default request's pod.
fn decide_dry_run(facts: &Facts<'_>) -> Verdict {
    decide(
        &EvictionRequest {
            dry_run: true,
            ..req()
        },
        facts,
        now(),
        &cfg(),
    )
}

#[test]
fn dry_run_allows_with_a_warning_about_the_deflection() {
    let (p, r, d) = (pod(), rs(), dep());
    let facts = chain(&p, &r, &d, Facts::default());
    let v = decide_dry_run(&facts);
    let Verdict::Allow { reason, warnings } = v else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("would refuse")
            && warnings[0].contains("rolling restart of Deployment shop/web"),
        "{warnings:?}"
    );
}

#[test]
fn dry_run_of_a_pdb_denial_names_the_budget() {
    let (p, r) = (pod(), rs());
    let d = DeploymentFacts {
        replicas: 3,
        ready_replicas: 3,
        ..dep()
    };
    let b = pdb("web-pdb", 0);
    let pdbs = [&b];
    let facts = chain(
        &p,
        &r,
        &d,
        Facts {
            pdbs: &pdbs,
            ..Facts::default()
        },
    );
    let Verdict::Allow { reason, warnings } = decide_dry_run(&facts) else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert!(warnings[0].contains("shop/web-pdb"), "{warnings:?}");
}

#[test]
fn dry_run_of_an_allow_says_so() {
    let Verdict::Allow { reason, warnings } = decide(
        &EvictionRequest {
            dry_run: true,
            ..req()
        },
        &Facts::default(),
        now(),
        &cfg(),
    ) else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert!(
        warnings[0].contains("would allow") && warnings[0].contains("pod_not_found"),
        "{warnings:?}"
    );
}
