//! Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
//! acquire when the Lease is free or expired (by our own clock since we last saw it change), renew
//! every retry period, and stop leading once renewals have failed for the renew deadline — before
//! the lease duration lets another replica take over — or as soon as someone else holds it.
//! On shutdown the Lease is released (holder cleared, `leaseDurationSeconds: 1`).

pub mod lease;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use lease::{KubeLeaseApi, LeaseApi, LeaseError};

/// Leader election settings (upstream flag defaults).
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Our identity (`holderIdentity`).
    pub identity: String,
    /// `--leader-elect-lease-duration` (137s).
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline` (107s).
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period` (26s).
    pub retry_period: Duration,
    /// Lease name (`--leader-elect-resource-name`).
    pub name: String,
    /// Lease namespace (`--leader-elect-resource-namespace`).
    pub namespace: String,
}

/// Result of one acquire-or-renew attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease now.
    Held,
    /// Another holder's Lease is still valid.
    HeldByOther(String),
    /// The attempt failed (API error, lost race); retry.
    Failed(String),
}

/// The acquire / renew / release state machine over a [`LeaseApi`].
pub struct Elector<A: LeaseApi> {
    api: A,
    cfg: LeaderConfig,
    observed: Option<(LeaseSpec, Instant)>,
}

impl<A: LeaseApi> Elector<A> {
    /// A candidate that holds nothing yet.
    pub fn new(api: A, cfg: LeaderConfig) -> Self {
        Elector {
            api,
            cfg,
            observed: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &LeaderConfig {
        &self.cfg
    }

    fn our_spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let ours = previous
            .and_then(|p| p.holder_identity.as_deref())
            .is_some_and(|h| h == self.cfg.identity);
        let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease_duration.as_secs().max(1) as i32),
            acquire_time: if ours {
                previous.and_then(|p| p.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if ours || previous.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..Default::default()
        }
    }

    /// One attempt to acquire or renew the Lease.
    pub async fn try_acquire_or_renew(&mut self) -> Attempt {
        let existing = match self.api.get().await {
            Ok(l) => l,
            Err(e) => return Attempt::Failed(format!("reading lease: {e}")),
        };
        let Some(existing) = existing else {
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.cfg.name.clone());
            lease.metadata.namespace = Some(self.cfg.namespace.clone());
            lease.spec = Some(self.our_spec(None));
            return match self.api.create(lease).await {
                Ok(l) => {
                    self.observe(l.spec.unwrap_or_default());
                    Attempt::Held
                }
                Err(e) => Attempt::Failed(format!("creating lease: {e}")),
            };
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let now = Instant::now();
        let changed = self.observed.as_ref().is_none_or(|(s, _)| *s != spec);
        if changed {
            self.observed = Some((spec.clone(), now));
        }
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if !holder.is_empty() && holder != self.cfg.identity {
            let duration =
                Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            let seen = self.observed.as_ref().map(|(_, t)| *t).unwrap_or(now);
            if seen + duration > now {
                return Attempt::HeldByOther(holder);
            }
        }
        let mut lease = existing;
        lease.metadata.managed_fields = None;
        lease.spec = Some(self.our_spec(Some(&spec)));
        match self.api.replace(lease).await {
            Ok(l) => {
                self.observe(l.spec.unwrap_or_default());
                Attempt::Held
            }
            Err(LeaseError::Conflict) => {
                Attempt::Failed("lost the race to update the lease (409)".into())
            }
            Err(e) => Attempt::Failed(format!("updating lease: {e}")),
        }
    }

    fn observe(&mut self, spec: LeaseSpec) {
        self.observed = Some((spec, Instant::now()));
    }

    /// Releases the Lease if we hold it: holder cleared, `leaseDurationSeconds: 1`.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(mut lease) = self.api.get().await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        lease.metadata.managed_fields = None;
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..Default::default()
        });
        self.api.replace(lease).await.map(|_| ())
    }
}

/// Runs the election until `shutdown`: publishes `true` on `leading` while we may evict, `false`
/// as soon as leadership is lost (at the latest when the renew deadline passes without a renewal).
/// Releases the Lease on shutdown when leading.
pub async fn run<A: LeaseApi>(
    mut elector: Elector<A>,
    leading: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let cfg = elector.config().clone();
    let mut last_renew: Option<Instant> = None;
    loop {
        let is_leader = *leading.borrow();
        let attempt_budget = match (is_leader, last_renew) {
            (true, Some(t)) => cfg
                .renew_deadline
                .saturating_sub(t.elapsed())
                .min(cfg.retry_period),
            _ => cfg.retry_period,
        };
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = tokio::time::timeout(attempt_budget, elector.try_acquire_or_renew()) => {
                r.unwrap_or_else(|_| Attempt::Failed("lease call timed out".into()))
            }
        };
        match &attempt {
            Attempt::Held => {
                last_renew = Some(Instant::now());
                if !is_leader {
                    tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "acquired leadership");
                    leading.send_replace(true);
                }
            }
            Attempt::HeldByOther(holder) => {
                if is_leader {
                    tracing::warn!(holder = %holder, "leadership lost: the lease is held by someone else");
                    leading.send_replace(false);
                } else {
                    tracing::debug!(holder = %holder, "lease held by another replica");
                }
            }
            Attempt::Failed(e) => {
                tracing::warn!(error = %e, "lease acquire/renew failed");
                if is_leader && last_renew.is_none_or(|t| t.elapsed() >= cfg.renew_deadline) {
                    tracing::warn!("leadership lost: renew deadline passed");
                    leading.send_replace(false);
                }
            }
        }
        // Sleep one retry period, but wake for the renew deadline when leading.
        let mut wait = cfg.retry_period;
        if *leading.borrow()
            && let Some(t) = last_renew
        {
            wait = wait.min(cfg.renew_deadline.saturating_sub(t.elapsed()));
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
        if *leading.borrow() && last_renew.is_some_and(|t| t.elapsed() >= cfg.renew_deadline) {
            tracing::warn!("leadership lost: renew deadline passed");
            leading.send_replace(false);
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        match elector.release().await {
            Ok(()) => tracing::info!("released the lease"),
            Err(e) => tracing::warn!(error = %e, "releasing the lease failed"),
        }
    }
}
