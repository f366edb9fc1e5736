//! Status, conditions, progress deadline and the cleanup of old ReplicaSets.

use super::*;

impl Sync<'_> {
    /// Upstream `DeploymentComplete`.
    pub(super) fn is_complete(&self, status: Option<&DeploymentStatus>) -> bool {
        let Some(s) = status else {
            return false;
        };
        s.updated_replicas.unwrap_or(0) == self.replicas
            && s.replicas.unwrap_or(0) == self.replicas
            && s.available_replicas.unwrap_or(0) == self.replicas
            && s.observed_generation.unwrap_or(0) >= self.d.metadata.generation.unwrap_or(0)
    }

    /// Upstream `cleanupDeployment`: deletes old, empty ReplicaSets beyond the history limit.
    pub(super) fn cleanup(&mut self) {
        let limit = self
            .spec()
            .revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY);
        if limit == i32::MAX {
            return;
        }
        let mut cleanable: Vec<usize> = self
            .old_indices()
            .into_iter()
            .filter(|i| self.rss[*i].metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit.max(0));
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            let (ra, rb) = (&self.rss[*a], &self.rss[*b]);
            revision(ra)
                .cmp(&revision(rb))
                .then_with(|| creation_order(ra, rb))
        });
        for i in cleanable.into_iter().take(diff as usize) {
            let rs = &self.rss[i];
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if rs_status(rs).0 != 0
                || rs_replicas(rs) != 0
                || self.dirty[i]
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            self.deletes
                .push(delete_action("apps/v1", "ReplicaSet", &rs.metadata, true));
        }
    }

    /// Upstream `calculateStatus` into `out_d.status` (keeps conditions, sets Available).
    pub(super) fn calculate_status(&mut self) {
        let (mut actual, mut ready, mut available, mut spec_total) = (0, 0, 0, 0);
        for rs in &self.rss {
            let (a, r, av) = rs_status(rs);
            actual += a;
            ready += r;
            available += av;
            spec_total += rs_replicas(rs);
        }
        let updated = self.new_idx.map_or(0, |n| rs_status(&self.rss[n]).0);
        let generation = self.d.metadata.generation;
        let min_available = self.replicas - self.max_unavailable();
        let now = self.now();
        let st = self.status_mut();
        st.observed_generation = generation;
        // The counts are `omitempty`: a zero is left out, as kube-apiserver serializes it.
        let count = |n: i32| Some(n).filter(|n| *n != 0);
        st.replicas = count(actual);
        st.updated_replicas = count(updated);
        st.ready_replicas = count(ready);
        st.available_replicas = count(available);
        st.unavailable_replicas = count((spec_total - available).max(0));
        if available >= min_available {
            set_condition(
                st,
                now,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            );
        } else {
            set_condition(
                st,
                now,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            );
        }
    }

    pub(super) fn sync_status_only(&mut self) {
        self.calculate_status();
    }

    /// Upstream `syncRolloutStatus`: status plus the Progressing condition.
    pub(super) fn sync_rollout_status(&mut self) {
        self.calculate_status();
        let now = self.now();
        let Some(deadline) = self.progress_deadline() else {
            remove_condition(self.status_mut(), "Progressing");
            return;
        };
        let new_status = self.out_d.status.clone().unwrap_or_default();
        let subject = match self.new_idx {
            Some(n) => format!("ReplicaSet \"{}\"", name(&self.rss[n].metadata)),
            None => format!("Deployment \"{}\"", name(&self.d.metadata)),
        };
        let current = get_condition(&new_status, "Progressing").cloned();
        let already_complete = new_status.replicas == new_status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
        if already_complete {
            return;
        }
        if self.is_complete(Some(&new_status)) {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                format!("{subject} has successfully progressed."),
            );
        } else if self.is_progressing(&new_status) {
            let ltt = current
                .as_ref()
                .filter(|c| c.status.as_deref() == Some("True"))
                .and_then(|c| c.last_transition_time.clone());
            let st = self.status_mut();
            remove_condition(st, "Progressing");
            set_condition(
                st,
                now,
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("{subject} is progressing."),
            );
            if let Some(ltt) = ltt
                && let Some(c) = st.conditions.as_mut().and_then(|cs| {
                    cs.iter_mut()
                        .find(|c| c.type_.as_deref() == Some("Progressing"))
                })
            {
                c.last_transition_time = Some(ltt);
            }
        } else if timed_out(&new_status, deadline, now) {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("{subject} has timed out progressing."),
            );
        }
    }

    /// Upstream `DeploymentProgressing`: compares the new status with the stored one.
    pub(super) fn is_progressing(&self, new: &DeploymentStatus) -> bool {
        let old = self.d.status.clone().unwrap_or_default();
        let g = |v: Option<i32>| v.unwrap_or(0);
        let old_old = g(old.replicas) - g(old.updated_replicas);
        let new_old = g(new.replicas) - g(new.updated_replicas);
        g(new.updated_replicas) > g(old.updated_replicas)
            || new_old < old_old
            || g(new.ready_replicas) > g(old.ready_replicas)
            || g(new.available_replicas) > g(old.available_replicas)
    }
}

/// Upstream `DeploymentTimedOut`: the Progressing condition was last updated more than the
/// deadline ago.
fn timed_out(status: &DeploymentStatus, deadline: i32, now: jiff::Timestamp) -> bool {
    let Some(c) = get_condition(status, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| crate::controllers::util::add_secs(t.0, f64::from(deadline)) < now),
    }
}
