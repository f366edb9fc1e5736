use super::*;
use crate::controllers::testing::{Sim, deployment, node};
use crate::controllers::util::{pod_is_ready, pod_is_terminating};
use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};

const DT: f64 = 0.1;

fn sim_with(d: Deployment) -> Sim {
    let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
    sim.state.deployments.push(d);
    let sim_state = sim.state.clone();
    let mut sim2 = Sim::new(sim_state);
    assert!(sim2.settle(DT, 500), "initial rollout settles");
    sim = sim2;
    sim
}

fn strategy(d: &mut Deployment, surge: Option<IntOrString>, unavail: Option<IntOrString>) {
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: surge,
            max_unavailable: unavail,
        }),
    });
}

fn restart(sim: &mut Sim, name: &str, at: &str) {
    let at = at.to_string();
    sim.edit_deployment("default", name, |d| {
        d.spec
            .template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("kubectl.kubernetes.io/restartedAt".into(), at);
    });
}

/// Hash label of the Deployment's current template (the new ReplicaSet's hash).
fn current_hash(sim: &Sim, name: &str) -> Option<String> {
    let d = sim.deployment("default", name)?;
    let want = canonical_template(&d.spec.template);
    sim.state
        .replica_sets
        .iter()
        .find(|rs| {
            rs.spec
                .template
                .as_ref()
                .is_some_and(|t| canonical_template(t) == want)
        })
        .and_then(|rs| {
            rs.spec
                .selector
                .match_labels
                .as_ref()?
                .get(HASH_LABEL)
                .cloned()
        })
}

struct Census {
    new_total: usize,
    new_ready: usize,
    old_total: usize,
    old_terminating: usize,
    serving: usize,
}

fn census(sim: &Sim, name: &str) -> Census {
    let hash = current_hash(sim, name);
    let mut c = Census {
        new_total: 0,
        new_ready: 0,
        old_total: 0,
        old_terminating: 0,
        serving: 0,
    };
    for p in sim.pods_with_prefix("default", &format!("{name}-")) {
        let h = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .cloned();
        let is_new = hash.is_some() && h == hash;
        if is_new {
            c.new_total += 1;
            c.new_ready += usize::from(pod_is_ready(p) && !pod_is_terminating(p));
        } else {
            c.old_total += 1;
            c.old_terminating += usize::from(pod_is_terminating(p));
        }
        c.serving += usize::from(pod_is_ready(p) && !pod_is_terminating(p));
    }
    c
}

/// Deployment default/web as the sim holds it (an empty one when it is gone).
fn web_deployment(sim: &Sim) -> Deployment {
    sim.deployment("default", "web")
        .cloned()
        .unwrap_or_else(|| deployment("", 0, ""))
}

/// What `kubectl rollout status` waits for.
fn rollout_done(d: &Deployment) -> bool {
    let s = d.status.clone().unwrap_or_default();
    let want = d.spec.replicas.unwrap_or(1);
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
        && s.available_replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
}

fn progressing(d: &Deployment) -> (String, String) {
    d.status
        .as_ref()
        .and_then(|s| get_condition(s, "Progressing"))
        .map(|c| {
            (
                c.status.clone().unwrap_or_default(),
                c.reason.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default()
}

#[test]
fn fenceposts_round_surge_up_and_unavailable_down() {
    use IntOrString::{Int, String as S};
    type Case = (i32, Option<IntOrString>, Option<IntOrString>, (i32, i32));
    let cases: Vec<Case> = vec![
        (1, None, None, (1, 0)),
        (4, None, None, (1, 1)),
        (10, None, None, (3, 2)),
        (1, Some(Int(0)), Some(Int(1)), (0, 1)),
        (1, Some(Int(0)), Some(Int(0)), (0, 1)),
        (3, Some(S("0%".into())), Some(S("10%".into())), (0, 1)),
        (5, Some(S("50%".into())), Some(S("50%".into())), (3, 2)),
        (0, None, None, (0, 1)),
    ];
    for (replicas, surge, unavail, want) in cases {
        let mut d = deployment("x", replicas, "img");
        strategy(&mut d, surge.clone(), unavail.clone());
        assert_eq!(
            fenceposts(&d),
            want,
            "replicas {replicas} surge {surge:?} unavail {unavail:?}"
        );
    }
    let mut d = deployment("x", 3, "img");
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    assert_eq!(fenceposts(&d), (0, 0));
}

#[test]
fn template_hash_is_stable_and_ignores_hash_label() {
    let d = deployment("web", 1, "nginx");
    let h1 = pod_template_hash(&d.spec.template, None);
    assert_eq!(h1, pod_template_hash(&d.spec.template.clone(), None));
    let mut labelled = d.spec.template.clone();
    labelled
        .metadata
        .as_mut()
        .and_then(|m| m.labels.as_mut())
        .map(|l| l.insert(HASH_LABEL.into(), "zzz".into()));
    assert_eq!(h1, pod_template_hash(&labelled, None));
    assert_ne!(h1, pod_template_hash(&d.spec.template, Some(1)));
    assert_ne!(
        h1,
        pod_template_hash(&deployment("web", 1, "nginx:2").spec.template, None)
    );
    assert!(
        h1.chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
}

#[test]
fn initial_rollout_sets_revisions_annotations_and_status() {
    let sim = sim_with(deployment("web", 2, "nginx"));
    let d = web_deployment(&sim);
    assert!(rollout_done(&d), "{:#?}\n{:#?}", d, sim.state.replica_sets);
    assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("1"));
    assert_eq!(
        progressing(&d),
        ("True".into(), "NewReplicaSetAvailable".into())
    );
    let st = d.status.clone().unwrap_or_default();
    assert_eq!(
        (
            st.replicas,
            st.updated_replicas,
            st.ready_replicas,
            st.available_replicas,
            st.unavailable_replicas
        ),
        (Some(2), Some(2), Some(2), Some(2), None)
    );
    assert_eq!(sim.state.replica_sets.len(), 1);
    let rs = &sim.state.replica_sets[0];
    let hash = pod_template_hash(&d.spec.template, None);
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert_eq!(annotation(&rs.metadata, REVISION_ANNOTATION), Some("1"));
    assert_eq!(
        annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION),
        Some("2")
    );
    assert_eq!(annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION), Some("3"));
    for p in sim.pods_with_prefix("default", "web-") {
        assert_eq!(
            p.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)),
            Some(&hash)
        );
    }
    // Idempotent once settled.
    assert!(crate::controllers::reconcile_all(&sim.state).is_empty());
}

#[test]
fn single_replica_rolling_update_surges_and_never_drops_to_zero_ready() {
    // Also with long ticks (a starved controller loop): one transition per tick either way.
    for dt in [DT, 0.7] {
        single_replica_rolling_update(dt);
    }
}

fn single_replica_rolling_update(dt: f64) {
    let mut sim = sim_with(deployment("web", 1, "nginx"));
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    let mut saw_surge = false;
    for _ in 0..1000 {
        let c = census(&sim, "web");
        assert!(c.serving >= 1, "a Ready pod must always serve");
        let ready = sim
            .deployment("default", "web")
            .and_then(|d| d.status.as_ref())
            .and_then(|s| s.ready_replicas);
        assert!(
            ready >= Some(1),
            "Deployment status.readyReplicas must never read 0: {ready:?}"
        );
        if c.old_terminating > 0 {
            assert!(
                c.new_ready >= 1,
                "old pod deleted only after the new one is Ready"
            );
        }
        saw_surge |= c.new_total == 1 && c.old_total == 1;
        let d = sim.deployment("default", "web").cloned();
        if c.old_total == 0 && d.as_ref().is_some_and(rollout_done) {
            break;
        }
        sim.step(dt);
    }
    assert!(saw_surge, "a second pod is created before the old one goes");
    let d = web_deployment(&sim);
    assert!(
        rollout_done(&d),
        "kubectl rollout status would finish: {:?}",
        d.status
    );
    assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("2"));
    assert_eq!(
        progressing(&d),
        ("True".into(), "NewReplicaSetAvailable".into())
    );
    let revs: Vec<i64> = sim.state.replica_sets.iter().map(revision).collect();
    assert_eq!(revs.len(), 2);
    assert!(revs.contains(&1) && revs.contains(&2));
}

#[test]
fn max_surge_zero_deletes_old_pod_first() {
    let mut d = deployment("web", 1, "nginx");
    strategy(&mut d, Some(IntOrString::Int(0)), Some(IntOrString::Int(1)));
    let mut sim = sim_with(d);
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    let mut old_went_first = false;
    for _ in 0..1000 {
        let c = census(&sim, "web");
        assert!(
            c.new_total + c.old_total - c.old_terminating <= 1,
            "never more than 1 live pod"
        );
        if c.old_terminating == 1 && c.new_total == 0 {
            old_went_first = true;
        }
        if c.old_total == 0 && sim.deployment("default", "web").is_some_and(rollout_done) {
            break;
        }
        sim.step(DT);
    }
    assert!(old_went_first);
    assert!(sim.deployment("default", "web").is_some_and(rollout_done));
}

#[test]
fn recreate_waits_for_old_pods_to_disappear() {
    let mut d = deployment("web", 2, "nginx");
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    let mut sim = sim_with(d);
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    let mut saw_gap = false;
    for _ in 0..2000 {
        let c = census(&sim, "web");
        assert!(
            c.old_total == 0 || c.new_total == 0,
            "old and new pods never coexist"
        );
        saw_gap |= c.old_total == 0 && c.new_total == 0;
        if c.old_total == 0 && sim.deployment("default", "web").is_some_and(rollout_done) {
            break;
        }
        sim.step(DT);
    }
    assert!(saw_gap);
    let d = web_deployment(&sim);
    assert!(rollout_done(&d));
    assert_eq!(d.status.and_then(|s| s.available_replicas), Some(2));
}

#[test]
fn paused_deployment_does_not_roll_until_resumed() {
    let mut sim = sim_with(deployment("web", 1, "nginx"));
    sim.edit_deployment("default", "web", |d| d.spec.paused = Some(true));
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    for _ in 0..100 {
        sim.step(DT);
    }
    assert_eq!(
        sim.state.replica_sets.len(),
        1,
        "no new ReplicaSet while paused"
    );
    let d = web_deployment(&sim);
    assert_eq!(
        progressing(&d),
        ("Unknown".into(), "DeploymentPaused".into())
    );
    assert!(!rollout_done(&d) || d.status.as_ref().and_then(|s| s.updated_replicas) == Some(0));
    sim.edit_deployment("default", "web", |d| d.spec.paused = Some(false));
    assert!(sim.run_until(DT, 1000, |s| {
        s.replica_sets.len() == 2 && s.deployments.iter().all(rollout_done) && s.pods.len() == 1
    }));
}

#[test]
fn progress_deadline_exceeded_when_new_pod_never_ready() {
    let mut d = deployment("web", 1, "nginx");
    d.spec.progress_deadline_seconds = Some(10);
    let mut sim = sim_with(d);
    sim.state.config.crashing_images = vec!["broken".into()];
    sim.edit_deployment("default", "web", |d| {
        if let Some(spec) = d.spec.template.spec.as_mut() {
            spec.containers[0].image = Some("broken".into());
        }
    });
    // Shortly after the change the rollout is progressing.
    for _ in 0..20 {
        sim.step(DT);
    }
    let d = web_deployment(&sim);
    assert_eq!(progressing(&d).0, "True");
    let started = sim.state.now;
    assert!(sim.run_until(DT, 400, |s| {
        s.deployments
            .iter()
            .all(|d| progressing(d) == ("False".into(), "ProgressDeadlineExceeded".into()))
    }));
    let waited = crate::controllers::util::secs_between(started, sim.state.now);
    assert!(
        waited >= 7.0,
        "deadline counted from the last progress, waited {waited}"
    );
    let c = census(&sim, "web");
    assert_eq!(
        (c.serving, c.old_total, c.new_ready),
        (1, 1, 0),
        "old pod keeps serving"
    );
    // Stays exceeded (no automatic rollback) and stable.
    for _ in 0..50 {
        sim.step(DT);
    }
    let d = web_deployment(&sim);
    assert_eq!(
        progressing(&d),
        ("False".into(), "ProgressDeadlineExceeded".into())
    );
}

#[test]
fn min_ready_seconds_delays_old_pod_removal() {
    let mut d = deployment("web", 1, "nginx");
    d.spec.min_ready_seconds = Some(5);
    let mut sim = sim_with(d);
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    let mut new_ready_at = None;
    for _ in 0..2000 {
        let c = census(&sim, "web");
        if c.new_ready == 1 && new_ready_at.is_none() {
            new_ready_at = Some(sim.state.now);
        }
        if c.old_terminating > 0 {
            let ready_at = new_ready_at.unwrap_or(sim.state.now);
            let waited = crate::controllers::util::secs_between(ready_at, sim.state.now);
            assert!(
                waited >= 4.0,
                "old pod removed only after minReadySeconds: {waited}"
            );
            break;
        }
        sim.step(DT);
    }
    assert!(
        sim.run_until(DT, 2000, |s| s.deployments.iter().all(rollout_done)
            && s.pods.len() == 1)
    );
}

#[test]
fn scaling_up_and_down_follows_replicas() {
    let mut sim = sim_with(deployment("web", 1, "nginx"));
    sim.edit_deployment("default", "web", |d| d.spec.replicas = Some(3));
    assert!(sim.run_until(DT, 500, |s| s.pods.len() == 3
        && s.deployments.iter().all(rollout_done)));
    let rs = &sim.state.replica_sets[0];
    assert_eq!(
        annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION),
        Some("3")
    );
    sim.edit_deployment("default", "web", |d| d.spec.replicas = Some(1));
    assert!(sim.run_until(DT, 1000, |s| s.pods.len() == 1
        && s.deployments.iter().all(rollout_done)));
    assert_eq!(sim.state.replica_sets.len(), 1);
}

#[test]
fn revision_history_limit_deletes_old_empty_replica_sets() {
    let mut d = deployment("web", 1, "nginx");
    d.spec.revision_history_limit = Some(1);
    let mut sim = sim_with(d);
    for i in 0..3 {
        restart(&mut sim, "web", &format!("2026-01-01T00:0{i}:00Z"));
        assert!(sim.run_until(DT, 2000, |s| {
            s.pods.len() == 1
                && s.pods
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none())
                && s.deployments.iter().all(rollout_done)
        }));
        sim.settle(DT, 100);
    }
    // New + at most one old ReplicaSet.
    assert_eq!(sim.state.replica_sets.len(), 2);
    let revs: Vec<i64> = sim.state.replica_sets.iter().map(revision).collect();
    assert!(revs.contains(&4) && revs.contains(&3), "{revs:?}");
}

#[test]
fn rollback_reuses_the_old_replica_set_with_a_new_revision() {
    let mut sim = sim_with(deployment("web", 1, "nginx"));
    let original = sim.state.replica_sets[0].metadata.name.clone();
    restart(&mut sim, "web", "2026-01-01T00:01:00Z");
    assert!(sim.run_until(DT, 2000, |s| s.pods.len() == 1
        && s.replica_sets.len() == 2
        && s.deployments.iter().all(rollout_done)));
    // `kubectl rollout undo`: the template goes back to revision 1's.
    sim.edit_deployment("default", "web", |d| {
        if let Some(a) = d
            .spec
            .template
            .metadata
            .as_mut()
            .and_then(|m| m.annotations.as_mut())
        {
            a.clear();
        }
    });
    assert!(sim.run_until(DT, 2000, |s| {
        s.pods.len() == 1
            && s.pods
                .iter()
                .all(|p| p.metadata.deletion_timestamp.is_none())
            && s.deployments.iter().all(rollout_done)
    }));
    assert_eq!(sim.state.replica_sets.len(), 2, "no third ReplicaSet");
    let reused = sim
        .state
        .replica_sets
        .iter()
        .find(|rs| rs.metadata.name == original);
    assert_eq!(reused.map(revision), Some(3));
    assert_eq!(reused.map(rs_replicas), Some(1));
    let d = web_deployment(&sim);
    assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("3"));
}

#[test]
fn name_clash_bumps_collision_count() {
    let d = deployment("web", 1, "nginx");
    let hash = pod_template_hash(&d.spec.template, None);
    let mut squatter = ReplicaSet::default();
    squatter.metadata.name = Some(format!("web-{hash}"));
    squatter.metadata.namespace = Some("default".into());
    squatter.spec.replicas = Some(0);
    let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi")]);
    sim.state.deployments.push(d);
    sim.state.replica_sets.push(squatter);
    let mut sim = Sim::new(sim.state);
    assert!(sim.settle(DT, 500));
    let d = web_deployment(&sim);
    assert_eq!(d.status.as_ref().and_then(|s| s.collision_count), Some(1));
    let want = format!("web-{}", pod_template_hash(&d.spec.template, Some(1)));
    assert!(
        sim.state
            .replica_sets
            .iter()
            .any(|rs| name(&rs.metadata) == want)
    );
    assert_eq!(sim.state.replica_sets.len(), 2);
    assert!(rollout_done(&d));
}

#[test]
fn server_side_template_defaulting_does_not_spawn_replica_sets() {
    let mut sim = sim_with(deployment("web", 1, "nginx"));
    // Pretend the server defaulted a field in the stored ReplicaSet template only.
    if let Some(spec) = sim.state.replica_sets[0]
        .spec
        .template
        .as_mut()
        .and_then(|t| t.spec.as_mut())
    {
        spec.dns_policy = Some("ClusterFirst".into());
    }
    for _ in 0..50 {
        sim.step(DT);
    }
    assert_eq!(sim.state.replica_sets.len(), 1);
    assert_eq!(sim.state.pods.len(), 1);
}

#[test]
fn missing_and_odd_fields_do_not_panic() {
    let mut d = deployment("odd", 1, "nginx");
    d.spec.selector = Default::default();
    d.spec.strategy = Some(DeploymentStrategy {
        type_: None,
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::String("bogus".into())),
            max_unavailable: None,
        }),
    });
    let mut sim = Sim::with_nodes(vec![]);
    sim.state.deployments.push(d);
    sim.state.deployments.push(Deployment::default());
    sim.state.replica_sets.push(ReplicaSet::default());
    sim.state.pods.push(Default::default());
    let _ = crate::controllers::reconcile_all(&sim.state);
    for _ in 0..5 {
        sim.step(DT);
    }
    // Absurd numbers.
    let mut huge = deployment("huge", i32::MAX, "nginx");
    strategy(
        &mut huge,
        Some(IntOrString::Int(i32::MAX)),
        Some(IntOrString::String("100%".into())),
    );
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("huge-rs".into());
    rs.spec.replicas = Some(i32::MAX);
    rs.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
        replicas: i32::MAX,
        available_replicas: Some(i32::MIN),
        ..Default::default()
    });
    let mut budget =
        crate::controllers::testing::pdb("b", "huge", Some(IntOrString::Int(i32::MIN)), None);
    budget.metadata.generation = Some(i64::MAX);
    let mut sim = Sim::with_nodes(vec![node("n1", "1e40", "-5")]);
    sim.state.deployments = vec![huge];
    sim.state.replica_sets = vec![rs];
    sim.state.pdbs = vec![budget];
    sim.state.config.pod_start_delay_seconds = f64::NAN;
    for _ in 0..3 {
        sim.step(f64::INFINITY);
    }
}
