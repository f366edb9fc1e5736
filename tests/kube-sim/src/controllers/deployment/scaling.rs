//! Upstream `scale`: resizing ReplicaSets when the Deployment's size changes (paused Deployments
//! and scaling events), proportionally across the active ones during a rolling update.

use super::*;

impl Sync<'_> {
    /// Upstream `scale` (paused Deployments and scaling events), including proportional scaling.
    pub(super) fn scale(&mut self) {
        let active: Vec<usize> = (0..self.rss.len())
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        // Only one active (or none: the newest) ReplicaSet → give it the full count.
        let target = match active.as_slice() {
            [only] => Some(*only),
            [] => self
                .new_idx
                .or_else(|| (!self.rss.is_empty()).then(|| self.rss.len() - 1)),
            _ => None,
        };
        if let Some(i) = target {
            if rs_replicas(&self.rss[i]) != self.replicas {
                self.scale_rs(i, self.replicas);
            }
            return;
        }
        if self.new_rs_saturated() {
            for i in self.old_indices() {
                if rs_replicas(&self.rss[i]) > 0 {
                    self.scale_rs(i, 0);
                }
            }
            return;
        }
        if !self.rolling {
            return;
        }
        for (i, size) in self.proportional_sizes(&active) {
            self.scale_rs(i, size);
        }
    }

    /// Whether the new ReplicaSet has the full count, annotated and available (then the old
    /// ones go away).
    fn new_rs_saturated(&self) -> bool {
        let Some(n) = self.new_idx else {
            return false;
        };
        let rs = &self.rss[n];
        rs_replicas(rs) == self.replicas
            && annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION)
                .and_then(|v| v.parse::<i32>().ok())
                == Some(self.replicas)
            && rs_status(rs).2 == self.replicas
    }

    /// The new size of each active ReplicaSet when the allowed total (size plus surge) is
    /// spread in proportion to their sizes, largest first; what rounding leaves over goes to
    /// the first. Empty when nothing changes.
    fn proportional_sizes(&self, active: &[usize]) -> Vec<(usize, i32)> {
        let total: i32 = active.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        let allowed = if self.replicas > 0 {
            self.replicas + self.surge
        } else {
            0
        };
        let to_add = allowed - total;
        if to_add == 0 {
            return Vec::new();
        }
        let mut order = active.to_vec();
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.rss[*a], &self.rss[*b]);
            rs_replicas(rb).cmp(&rs_replicas(ra)).then_with(|| {
                if to_add > 0 {
                    creation_order(rb, ra)
                } else {
                    creation_order(ra, rb)
                }
            })
        });
        let status_replicas = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let mut added = 0;
        let mut sizes: Vec<(usize, i32)> = Vec::new();
        for i in &order {
            let rs = &self.rss[*i];
            let cur = rs_replicas(rs);
            let proportion = if cur == 0 || to_add == added {
                0
            } else {
                let fraction = self.proportion(rs, allowed, status_replicas);
                let remaining = to_add - added;
                if to_add > 0 {
                    fraction.min(remaining)
                } else {
                    fraction.max(remaining)
                }
            };
            added += proportion;
            sizes.push((*i, cur + proportion));
        }
        if let Some(first) = sizes.first_mut() {
            first.1 = (first.1 + to_add - added).max(0);
        }
        sizes
    }

    /// Upstream `getReplicaSetFraction`: how many replicas `rs` gains (or loses) for its share
    /// of `allowed`, against the size it was annotated for.
    fn proportion(&self, rs: &ReplicaSet, allowed: i32, status_replicas: i32) -> i32 {
        let cur = rs_replicas(rs);
        if self.replicas == 0 {
            return -cur;
        }
        let annotated = annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION)
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(status_replicas);
        if annotated <= 0 {
            0
        } else {
            let size = f64::from(cur) * f64::from(allowed) / f64::from(annotated);
            size.round() as i32 - cur
        }
    }
}
