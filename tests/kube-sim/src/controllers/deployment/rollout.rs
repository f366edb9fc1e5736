//! Rolling and Recreate rollouts: growing the new ReplicaSet and shrinking the old ones.

use super::*;

impl Sync<'_> {
    pub(super) fn rollout_rolling(&mut self) {
        self.sync_revision(true);
        let Some(n) = self.new_idx else {
            // Creation postponed (hash collision): only report status.
            self.sync_rollout_status();
            return;
        };
        if self.reconcile_new(n) || self.reconcile_old(n) {
            self.sync_rollout_status();
            return;
        }
        if self.is_complete(self.d.status.as_ref()) {
            self.cleanup();
        }
        self.sync_rollout_status();
    }

    /// Upstream `reconcileNewReplicaSet`; `true` when the new ReplicaSet was scaled.
    pub(super) fn reconcile_new(&mut self, n: usize) -> bool {
        let cur = rs_replicas(&self.rss[n]);
        if cur == self.replicas {
            return false;
        }
        if cur > self.replicas {
            self.scale_rs(n, self.replicas);
            return true;
        }
        let total: i32 = self.rss.iter().map(rs_replicas).sum();
        let max_total = self.replicas + self.surge;
        if total >= max_total {
            return false;
        }
        let up = (max_total - total).min(self.replicas - cur);
        self.scale_rs(n, cur + up);
        up > 0
    }

    /// Upstream `reconcileOldReplicaSets`; `true` when an old ReplicaSet was scaled down.
    pub(super) fn reconcile_old(&mut self, n: usize) -> bool {
        let olds: Vec<usize> = self
            .old_indices()
            .into_iter()
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        let old_pods: i32 = olds.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        if old_pods == 0 {
            return false;
        }
        let all_pods: i32 = self.rss.iter().map(rs_replicas).sum();
        let min_available = self.replicas - self.max_unavailable();
        let new_unavailable = rs_replicas(&self.rss[n]) - rs_status(&self.rss[n]).2;
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return false;
        }
        // Unhealthy replicas of old ReplicaSets go first (oldest ReplicaSet first).
        let mut cleaned = 0;
        for i in &olds {
            if cleaned >= max_scaled_down {
                break;
            }
            let cur = rs_replicas(&self.rss[*i]);
            let unhealthy = cur - rs_status(&self.rss[*i]).2;
            if cur == 0 || unhealthy <= 0 {
                continue;
            }
            let down = (max_scaled_down - cleaned).min(unhealthy);
            self.scale_rs(*i, cur - down);
            cleaned += down;
        }
        // Then healthy ones, as long as enough pods stay available.
        let available: i32 = self.rss.iter().map(|rs| rs_status(rs).2).sum();
        let mut scaled = 0;
        if available > min_available {
            let budget = available - min_available;
            for i in &olds {
                if scaled >= budget {
                    break;
                }
                let cur = rs_replicas(&self.rss[*i]);
                if cur == 0 {
                    continue;
                }
                let down = cur.min(budget - scaled);
                self.scale_rs(*i, cur - down);
                scaled += down;
            }
        }
        cleaned + scaled > 0
    }

    pub(super) fn rollout_recreate(&mut self) {
        self.sync_revision(false);
        let mut scaled = false;
        for i in self.old_indices() {
            if rs_replicas(&self.rss[i]) > 0 {
                self.scale_rs(i, 0);
                scaled = true;
            }
        }
        if scaled || self.old_pods_running() {
            self.sync_rollout_status();
            return;
        }
        if self.new_idx.is_none() {
            self.sync_revision(true);
        }
        if let Some(n) = self.new_idx
            && rs_replicas(&self.rss[n]) != self.replicas
        {
            self.scale_rs(n, self.replicas);
        }
        if self.is_complete(self.d.status.as_ref()) {
            self.cleanup();
        }
        self.sync_rollout_status();
    }

    /// Any old ReplicaSet still reports pods, or owns a pod that is not terminal.
    pub(super) fn old_pods_running(&self) -> bool {
        self.old_indices().iter().any(|i| {
            let rs = &self.rss[*i];
            rs_status(rs).0 > 0
                || self.state.pods.iter().any(|p| {
                    ns(&p.metadata) == ns(&rs.metadata)
                        && is_controlled_by(&p.metadata, "ReplicaSet", &rs.metadata)
                        && !pod_is_terminal(p)
                })
        })
    }

    /// Upstream `MaxUnavailable(deployment)`.
    pub(super) fn max_unavailable(&self) -> i32 {
        if !self.rolling || self.replicas == 0 {
            0
        } else {
            self.unavailable.min(self.replicas)
        }
    }
}
