//! Fault injection for reliability tests: error codes and latency per verb/resource.
use std::sync::Mutex;
use std::time::Duration;

use crate::error::ApiError;

/// One fault rule; `None` fields match anything.
#[derive(Clone, Debug, Default)]
pub struct FaultRule {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: Option<String>,
    /// `pods`, `pods/eviction`, `deployments`, … (`pods` matches only the main resource).
    pub resource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Answer with this status code (a `metav1.Status` with the matching reason).
    pub status: Option<u16>,
    pub message: Option<String>,
    /// Sleep this long before handling (or before answering with `status`).
    pub latency: Option<Duration>,
    /// Sleep this long AFTER the request was handled (its effect is already stored), then
    /// answer: a response lost or late on the way back, e.g. a client killed between its write
    /// and the reply. kube-apiserver has no such thing; it is a test fault. Ignored with `status`.
    pub latency_after: Option<Duration>,
    /// Apply this many times, then retire the rule.
    pub times: Option<u32>,
}

/// What a request should suffer.
#[derive(Debug, Default)]
pub struct Injected {
    pub latency: Option<Duration>,
    /// Delay of the answer after the request was applied.
    pub latency_after: Option<Duration>,
    pub error: Option<ApiError>,
}

/// The active fault rules.
#[derive(Default)]
pub struct Faults {
    rules: Mutex<Vec<(u64, FaultRule)>>,
    next: Mutex<u64>,
}

impl Faults {
    /// Adds a rule and returns its id.
    pub fn add(&self, rule: FaultRule) -> u64 {
        let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        let id = *n;
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, rule));
        id
    }

    pub fn remove(&self, id: u64) {
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(i, _)| *i != id);
    }

    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// First matching rule wins; its use counter is decremented.
    pub fn check(&self, verb: &str, resource: &str, ns: &str, name: &str) -> Injected {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let pos = rules.iter().position(|(_, r)| {
            r.verb.as_deref().is_none_or(|v| v == verb || v == "*")
                && r.resource
                    .as_deref()
                    .is_none_or(|v| v == resource || v == "*")
                && r.namespace.as_deref().is_none_or(|v| v == ns)
                && r.name.as_deref().is_none_or(|v| v == name)
        });
        let Some(i) = pos else {
            return Injected::default();
        };
        let rule = rules[i].1.clone();
        if let Some(t) = &mut rules[i].1.times {
            *t = t.saturating_sub(1);
            if *t == 0 {
                rules.remove(i);
            }
        }
        Injected {
            latency: rule.latency,
            latency_after: rule.latency_after,
            error: rule.status.map(|c| {
                ApiError::from_code(
                    c,
                    rule.message
                        .unwrap_or_else(|| format!("injected fault ({c})")),
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch_rule(after: Duration, times: u32) -> FaultRule {
        FaultRule {
            verb: Some("patch".into()),
            resource: Some("deployments".into()),
            name: Some("api".into()),
            latency_after: Some(after),
            times: Some(times),
            ..Default::default()
        }
    }

    #[test]
    fn faults_latency_after_is_reported_apart_from_latency_and_retires_with_times() {
        let f = Faults::default();
        f.add(patch_rule(Duration::from_millis(700), 1));
        // Another verb or name does not match.
        let other = f.check("get", "deployments", "shop", "api");
        assert_eq!((other.latency, other.latency_after), (None, None));
        assert!(
            f.check("patch", "deployments", "shop", "web")
                .latency_after
                .is_none()
        );
        let hit = f.check("patch", "deployments", "shop", "api");
        assert_eq!(hit.latency_after, Some(Duration::from_millis(700)));
        assert_eq!(hit.latency, None, "nothing delays the handling itself");
        assert!(hit.error.is_none());
        // `times: 1` is used up.
        assert!(
            f.check("patch", "deployments", "shop", "api")
                .latency_after
                .is_none()
        );
    }
}
