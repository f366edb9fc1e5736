//! The surge reconciler: a bounded background loop in the webhook that restores rule B surges.
//!
//! The state lives in the Deployments' annotations, so a webhook replica that restarted (or any
//! other replica) picks up surges it did not make. Every tick it looks at the Deployments the
//! cache holds with a surge record and restores those whose pods have all left unschedulable
//! nodes, or whose surge is older than the deflect deadline. Restores are compare-and-set
//! writes; when two replicas race, one wins and the other finds nothing to restore.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::source::FactSource;
use crate::restart::Restarter;
use crate::restart::surge::{RestoreOutcome, restore_due};

/// Most restores attempted per tick (the rest wait for the next one).
pub const MAX_RESTORES_PER_TICK: usize = 32;

/// Runs [`reconcile_once`] every `interval`, forever.
pub async fn run(
    source: Arc<dyn FactSource>,
    restarter: Arc<dyn Restarter>,
    deadline: Duration,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        reconcile_once(
            source.as_ref(),
            restarter.as_ref(),
            deadline,
            Timestamp::now(),
        )
        .await;
    }
}

/// One pass: restores every due surge (at most [`MAX_RESTORES_PER_TICK`]); returns how many
/// were restored.
pub async fn reconcile_once(
    source: &dyn FactSource,
    restarter: &dyn Restarter,
    deadline: Duration,
    now: Timestamp,
) -> usize {
    if !source.ready() {
        return 0;
    }
    let mut restored = 0;
    for d in source
        .surged_deployments()
        .into_iter()
        .take(MAX_RESTORES_PER_TICK)
    {
        let Some(surge) = &d.surge else { continue };
        let on_unschedulable = match source.deployment_pods(&d.namespace, &d.name) {
            None => None,
            Some(pods) => {
                let mut n = 0;
                for p in &pods {
                    let Some(node) = &p.node else { continue };
                    // A node we cannot read is not known to be cordoned: wait for the deadline
                    // rather than restore under a drain.
                    match source.node_unschedulable(node).await {
                        Ok(Some(false)) => {}
                        _ => n += 1,
                    }
                }
                Some(n)
            }
        };
        let Some(reason) = restore_due(surge.at, on_unschedulable, now, deadline) else {
            continue;
        };
        match restarter.restore(&d.namespace, &d.name, reason).await {
            RestoreOutcome::Restored { .. } => restored += 1,
            RestoreOutcome::NotSurged => {}
            RestoreOutcome::Failed { error } => {
                tracing::warn!(deployment = %d.key(), %error, "restoring a surge failed; retrying next tick");
            }
        }
    }
    restored
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::future::BoxFuture;

    use super::*;
    use crate::restart::{RestartOutcome, RestartRequest, RestoreReason};
    use crate::source::{MemorySource, Placement};
    use kube_descheduler_engine::workload::facts::{DeploymentFacts, RecordedSurge};

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, RestoreReason)>>);

    impl Restarter for Recorder {
        fn restart(&self, _req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
            Box::pin(std::future::ready(RestartOutcome::Failed {
                error: "unused".into(),
            }))
        }
        fn restore<'a>(
            &'a self,
            namespace: &'a str,
            deployment: &'a str,
            reason: RestoreReason,
        ) -> BoxFuture<'a, RestoreOutcome> {
            self.0
                .lock()
                .unwrap()
                .push((format!("{namespace}/{deployment}"), reason));
            Box::pin(std::future::ready(RestoreOutcome::Restored { replicas: 3 }))
        }
    }

    fn surged(name: &str, at: Timestamp) -> DeploymentFacts {
        DeploymentFacts {
            name: name.into(),
            uid: format!("uid-{name}"),
            revision: Some(1),
            pdb_surge: Some(true),
            surge: Some(RecordedSurge {
                original_replicas: 3,
                surged_replicas: 4,
                at,
            }),
            ..crate::testing::web_deployment(4)
        }
    }

    fn placed(name: &str, node: &str) -> Placement {
        Placement {
            name: name.into(),
            ready: true,
            terminating: false,
            node: Some(node.into()),
        }
    }

    #[test]
    fn restores_drained_and_expired_surges_only() {
        let now: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let ago = |s: i64| now.checked_sub(jiff::SignedDuration::from_secs(s)).unwrap();
        let mut s = MemorySource::new();
        s.nodes.insert("a".into(), true);
        s.nodes.insert("b".into(), false);
        for (name, at, pods) in [
            // Still a pod on the cordoned node: keep the surge.
            (
                "draining",
                ago(5),
                vec![placed("p1", "a"), placed("p2", "b")],
            ),
            // All pods off cordoned nodes: restore.
            (
                "drained",
                ago(5),
                vec![placed("p1", "b"), placed("p2", "b")],
            ),
            // Still draining, but past the deadline: restore.
            ("expired", ago(700), vec![placed("p1", "a")]),
        ] {
            s.deployments
                .insert(format!("shop/{name}"), Arc::new(surged(name, at)));
            s.placements.insert(format!("shop/{name}"), pods);
        }
        // Pods unknown (no cache entry): wait.
        s.deployments
            .insert("shop/unknown".into(), Arc::new(surged("unknown", ago(5))));
        let r = Recorder::default();
        let n = futures::executor::block_on(reconcile_once(&s, &r, Duration::from_secs(600), now));
        assert_eq!(n, 2);
        let mut got = r.0.lock().unwrap().clone();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                ("shop/drained".to_string(), RestoreReason::Drained),
                ("shop/expired".to_string(), RestoreReason::Deadline),
            ]
        );
    }
}
