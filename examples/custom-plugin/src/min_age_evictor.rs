//! MinAgeEvictor (an evictor, at the Filter extension point next to the DefaultEvictor): never
//! evicts a pod younger than `minPodAge` (a pod that just started is still warming caches, and
//! moving it again wastes the start) nor a pod labelled `protectLabel: "true"` (the owner's
//! opt-out). Profiles list it with the DefaultEvictor; a pod must pass both.

use std::any::Any;

use kube_descheduler::plugin::{
    ArgsError, EvictorFactory, EvictorPlugin, PluginArgs, PodId, Snapshot, Timestamp, decode_args,
    human_duration, parse_duration,
};
use serde::Deserialize;

/// The evictor's registered name.
pub const NAME: &str = "MinAgeEvictor";

/// The evictor's args.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MinAgeEvictorArgs {
    /// Pods younger than this (a Go duration, e.g. `10m`) are not evicted. Default `10m`.
    #[serde(default = "ten_minutes")]
    pub min_pod_age: String,
    /// Pods with this label set to `"true"` are not evicted. Default
    /// `descheduler.example.com/protected`; empty: no opt-out label.
    #[serde(default = "protect_label")]
    pub protect_label: String,
}

fn ten_minutes() -> String {
    "10m".into()
}

fn protect_label() -> String {
    "descheduler.example.com/protected".into()
}

impl PluginArgs for MinAgeEvictorArgs {
    fn validate(&self) -> Result<(), ArgsError> {
        parse_duration("minPodAge", &self.min_pod_age).map(|_| ())
    }
}

/// The built evictor.
pub struct MinAgeEvictor {
    min_age_secs: i64,
    protect_label: String,
}

/// The registry entry.
pub fn factory() -> EvictorFactory {
    EvictorFactory::new(NAME, MinAgeEvictor::from_args)
}

impl MinAgeEvictor {
    /// Decodes (strictly), defaults and validates `args`.
    pub fn from_args(args: &serde_json::Value) -> Result<Self, ArgsError> {
        let args: MinAgeEvictorArgs = decode_args(args)?;
        let age = parse_duration("minPodAge", &args.min_pod_age)?;
        Ok(MinAgeEvictor {
            min_age_secs: i64::try_from(age.as_secs()).unwrap_or(i64::MAX),
            protect_label: args.protect_label,
        })
    }

    /// Why `pod` is protected, if it is.
    fn rejection(&self, s: &Snapshot, pod: PodId, now: Timestamp) -> Option<String> {
        let p = s.pod(pod);
        if !self.protect_label.is_empty()
            && p.labels.get(&self.protect_label).map(String::as_str) == Some("true")
        {
            return Some(format!(
                "label {}=true protects the pod",
                self.protect_label
            ));
        }
        // A pod without a creation time counts as old (as PodLifeTime does).
        let age = p
            .creation_timestamp
            .map(|t| now.duration_since(t).as_secs())?;
        (age < self.min_age_secs).then(|| {
            format!(
                "the pod is {} old, younger than minPodAge {}",
                human_duration(age),
                human_duration(self.min_age_secs)
            )
        })
    }
}

impl EvictorPlugin for MinAgeEvictor {
    fn name(&self) -> &str {
        NAME
    }

    fn filter(&self, s: &Snapshot, pod: PodId, now: Timestamp) -> bool {
        self.rejection(s, pod, now).is_none()
    }

    fn filter_reads_evictions(&self) -> bool {
        false
    }

    fn explain_filter(&self, s: &Snapshot, pod: PodId, now: Timestamp) -> Vec<String> {
        self.rejection(s, pod, now).into_iter().collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_descheduler::testing::{node, now, pod, snapshot};
    use serde_json::json;

    #[test]
    fn young_and_labelled_pods_are_protected() {
        let s = snapshot(
            vec![node("n1").build()],
            vec![
                pod("shop", "old", "n1").age(3600).build(),
                pod("shop", "young", "n1").age(250).build(),
                pod("shop", "kept", "n1")
                    .age(3600)
                    .label("descheduler.example.com/protected", "true")
                    .build(),
                pod("shop", "not-kept", "n1")
                    .age(3600)
                    .label("descheduler.example.com/protected", "no")
                    .build(),
            ],
        );
        let e = MinAgeEvictor::from_args(&json!({})).expect("defaults");
        let verdicts: Vec<(String, Vec<String>)> = (0..4)
            .map(|p| (s.pod(p).name.clone(), e.explain_filter(&s, p, now())))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("old".to_string(), vec![]),
                (
                    "young".to_string(),
                    vec!["the pod is 4m 10s old, younger than minPodAge 10m".to_string()]
                ),
                (
                    "kept".to_string(),
                    vec![
                        "label descheduler.example.com/protected=true protects the pod".to_string()
                    ]
                ),
                ("not-kept".to_string(), vec![]),
            ]
        );
        assert!(e.filter(&s, 0, now()) && !e.filter(&s, 1, now()));
        let e = MinAgeEvictor::from_args(&json!({"minPodAge": "2m", "protectLabel": ""}))
            .expect("valid");
        assert!((0..4).all(|p| e.filter(&s, p, now())));
    }

    #[test]
    fn bad_args_name_the_field() {
        let err = |args| match MinAgeEvictor::from_args(&args) {
            Ok(_) => panic!("{args} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err(json!({"minPodAge": "ten minutes"})).starts_with("args.minPodAge: "));
        assert!(err(json!({"minPodAge": 10})).starts_with("args.minPodAge: "));
        assert!(err(json!({"minAge": "1m"})).contains("unknown field `minAge`"));
    }
}
