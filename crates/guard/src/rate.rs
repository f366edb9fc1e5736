//! Token buckets bounding the guard's side effects whatever the caller: every rolling restart
//! (rule A) and every surge (rule B) takes one token from the cluster-wide bucket and one from
//! its namespace's bucket. When either is empty the eviction is answered 429 and nothing is
//! patched; a real drain retries (kubectl every 5 s) and gets a token once the buckets refill,
//! while a flood of forged reviews patches at most the buckets' worth.
//!
//! The namespace bucket is checked first and both are taken together, so one namespace cannot
//! empty the cluster-wide bucket for the others: it is bounded by its own, smaller burst. A
//! review whose Deployment turns out to be in flight already gives its tokens back
//! ([`RestartBudget::refund`]): it patched nothing.
//!
//! Buckets refill continuously at `tokens / period` and hold at most `burst` tokens. A full
//! namespace bucket is the same as a fresh one, so full buckets are forgotten when many
//! namespaces are tracked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A refill rate: `tokens` every `period`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per period.
    pub tokens: u32,
    /// The period.
    pub period: Duration,
}

impl Rate {
    fn per_second(&self) -> f64 {
        if self.period.is_zero() {
            return 0.0;
        }
        f64::from(self.tokens) / self.period.as_secs_f64()
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{:?}", self.tokens, self.period)
    }
}

/// Parses `N/DURATION` (e.g. `10/1m`, `1/30s`); the duration must be greater than 0.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let (n, period) = s
        .split_once('/')
        .ok_or_else(|| format!("invalid rate {s:?}: expected TOKENS/DURATION, e.g. 10/1m"))?;
    let tokens: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("invalid rate {s:?}: {n:?} is not a whole number of tokens"))?;
    let period = kube_descheduler_engine::duration::parse_go_duration(period)?;
    if period.is_zero() {
        return Err(format!(
            "invalid rate {s:?}: the period must be greater than 0"
        ));
    }
    Ok(Rate { tokens, period })
}

/// The limits of a [`RestartBudget`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// Cluster-wide refill.
    pub rate: Rate,
    /// Cluster-wide capacity.
    pub burst: u32,
    /// Refill of each namespace's bucket.
    pub namespace_rate: Rate,
    /// Capacity of each namespace's bucket.
    pub namespace_burst: u32,
}

impl Default for RateLimits {
    /// 100 at once and 50 a minute cluster-wide; 25 at once and 10 a minute per namespace. A
    /// drain restarts each single-replica Deployment of a node once, so a node with up to 25 of
    /// them in one namespace drains without waiting, and a forged flood restarts at most 100
    /// (25 per namespace) plus the refill.
    fn default() -> Self {
        RateLimits {
            rate: Rate {
                tokens: 50,
                period: Duration::from_secs(60),
            },
            burst: 100,
            namespace_rate: Rate {
                tokens: 10,
                period: Duration::from_secs(60),
            },
            namespace_burst: 25,
        }
    }
}

impl RateLimits {
    /// Checks the limits are usable; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.burst == 0 {
            return Err("--restart-burst must be at least 1".into());
        }
        if self.namespace_burst == 0 {
            return Err("--namespace-restart-burst must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: u32, now: Instant) -> Self {
        Bucket {
            tokens: f64::from(burst),
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, burst: u32, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second()).min(f64::from(burst));
        self.at = now;
    }
}

/// Which bucket was empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exhausted {
    /// The cluster-wide bucket.
    Cluster,
    /// The bucket of this namespace.
    Namespace(String),
}

struct Buckets {
    cluster: Bucket,
    namespaces: HashMap<String, Bucket>,
}

/// The cluster-wide and per-namespace token buckets of one webhook replica.
pub struct RestartBudget {
    limits: RateLimits,
    buckets: Mutex<Buckets>,
}

/// Namespaces tracked before full buckets are forgotten.
const TRACKED_NAMESPACES: usize = 4096;

impl RestartBudget {
    /// Full buckets with `limits`.
    pub fn new(limits: RateLimits) -> Self {
        let now = Instant::now();
        RestartBudget {
            limits,
            buckets: Mutex::new(Buckets {
                cluster: Bucket::full(limits.burst, now),
                namespaces: HashMap::new(),
            }),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// Takes one token from `namespace`'s bucket and one from the cluster-wide bucket, or none
    /// when either is empty.
    pub fn try_take(&self, namespace: &str) -> Result<(), Exhausted> {
        self.try_take_at(namespace, Instant::now())
    }

    /// [`RestartBudget::try_take`] at `now` (tests).
    pub fn try_take_at(&self, namespace: &str, now: Instant) -> Result<(), Exhausted> {
        let l = self.limits;
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        b.cluster.refill(l.rate, l.burst, now);
        if b.namespaces.len() >= TRACKED_NAMESPACES && !b.namespaces.contains_key(namespace) {
            b.namespaces.retain(|_, nb| {
                nb.refill(l.namespace_rate, l.namespace_burst, now);
                nb.tokens < f64::from(l.namespace_burst)
            });
        }
        let ns = b
            .namespaces
            .entry(namespace.to_owned())
            .or_insert_with(|| Bucket::full(l.namespace_burst, now));
        ns.refill(l.namespace_rate, l.namespace_burst, now);
        if ns.tokens < 1.0 {
            return Err(Exhausted::Namespace(namespace.to_owned()));
        }
        if b.cluster.tokens < 1.0 {
            return Err(Exhausted::Cluster);
        }
        if let Some(ns) = b.namespaces.get_mut(namespace) {
            ns.tokens -= 1.0;
        }
        b.cluster.tokens -= 1.0;
        Ok(())
    }

    /// Gives back the tokens of a take that patched nothing (the Deployment was in flight).
    pub fn refund(&self, namespace: &str) {
        let l = self.limits;
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        b.cluster.tokens = (b.cluster.tokens + 1.0).min(f64::from(l.burst));
        if let Some(ns) = b.namespaces.get_mut(namespace) {
            ns.tokens = (ns.tokens + 1.0).min(f64::from(l.namespace_burst));
        }
    }

    /// The 429 message for an empty bucket.
    pub fn exhausted_message(&self, what: &str, pod_key: &str, exhausted: &Exhausted) -> String {
        let l = &self.limits;
        let which = match exhausted {
            Exhausted::Cluster => format!(
                "cluster-wide budget of {} at once, refilled at {}",
                l.burst, l.rate
            ),
            Exhausted::Namespace(ns) => format!(
                "budget of namespace {ns} ({} at once, refilled at {})",
                l.namespace_burst, l.namespace_rate
            ),
        };
        format!(
            "Cannot evict pod {pod_key} yet: the kube-descheduler eviction guard is rate limited: it has used its {which} for {what}; nothing was changed. Retry the eviction later."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(burst: u32, ns_burst: u32) -> RateLimits {
        RateLimits {
            rate: Rate {
                tokens: 1,
                period: Duration::from_secs(10),
            },
            burst,
            namespace_rate: Rate {
                tokens: 1,
                period: Duration::from_secs(60),
            },
            namespace_burst: ns_burst,
        }
    }

    #[test]
    fn rates_parse_and_bad_ones_name_the_problem() {
        assert_eq!(
            parse_rate("10/1m"),
            Ok(Rate {
                tokens: 10,
                period: Duration::from_secs(60)
            })
        );
        assert!(parse_rate("10").unwrap_err().contains("TOKENS/DURATION"));
        assert!(parse_rate("x/1m").unwrap_err().contains("whole number"));
        assert!(parse_rate("1/0s").unwrap_err().contains("greater than 0"));
        assert!(RateLimits::default().validate().is_ok());
        assert!(
            limits(0, 1)
                .validate()
                .unwrap_err()
                .contains("--restart-burst")
        );
        assert!(
            limits(1, 0)
                .validate()
                .unwrap_err()
                .contains("--namespace-restart-burst")
        );
    }

    #[test]
    fn a_namespace_is_bounded_by_its_own_burst_and_leaves_the_rest_for_others() {
        let budget = RestartBudget::new(limits(4, 2));
        let t = Instant::now();
        assert_eq!(budget.try_take_at("flood", t), Ok(()));
        assert_eq!(budget.try_take_at("flood", t), Ok(()));
        assert_eq!(
            budget.try_take_at("flood", t),
            Err(Exhausted::Namespace("flood".into()))
        );
        // The refused take took nothing from the cluster bucket: two are left for others.
        assert_eq!(budget.try_take_at("shop", t), Ok(()));
        assert_eq!(budget.try_take_at("web", t), Ok(()));
        assert_eq!(budget.try_take_at("db", t), Err(Exhausted::Cluster));
    }

    #[test]
    fn buckets_refill_at_their_rate_up_to_the_burst() {
        let budget = RestartBudget::new(limits(2, 5));
        let t = Instant::now();
        assert_eq!(budget.try_take_at("a", t), Ok(()));
        assert_eq!(budget.try_take_at("b", t), Ok(()));
        assert_eq!(budget.try_take_at("c", t), Err(Exhausted::Cluster));
        // 1 token per 10 s cluster-wide.
        let later = t + Duration::from_secs(9);
        assert_eq!(budget.try_take_at("c", later), Err(Exhausted::Cluster));
        let later = t + Duration::from_secs(10);
        assert_eq!(budget.try_take_at("c", later), Ok(()));
        // A long pause fills the bucket to its burst, not beyond.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!(budget.try_take_at("d", much_later), Ok(()));
        assert_eq!(budget.try_take_at("e", much_later), Ok(()));
        assert_eq!(budget.try_take_at("f", much_later), Err(Exhausted::Cluster));
    }

    #[test]
    fn a_refund_gives_both_tokens_back() {
        let budget = RestartBudget::new(limits(1, 1));
        let t = Instant::now();
        assert_eq!(budget.try_take_at("a", t), Ok(()));
        assert_eq!(
            budget.try_take_at("a", t),
            Err(Exhausted::Namespace("a".into()))
        );
        budget.refund("a");
        assert_eq!(budget.try_take_at("a", t), Ok(()));
    }

    #[test]
    fn the_message_says_which_budget_is_empty() {
        let budget = RestartBudget::new(RateLimits::default());
        let m = budget.exhausted_message(
            "rolling restarts",
            "shop/api-1",
            &Exhausted::Namespace("shop".into()),
        );
        assert!(m.contains("rate limited"), "{m}");
        assert!(m.contains("namespace shop"), "{m}");
        assert!(m.contains("nothing was changed"), "{m}");
        assert!(
            !m.contains(super::super::decision::DEFLECTION_PHRASE),
            "{m}"
        );
    }
}
