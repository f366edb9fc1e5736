//! Converting a pod (as a [`PodView`]) into the lean model, sharing the parts that the pods of one
//! owner have in common, and reading the API server's timestamps.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as core;

use super::requests::RequestsMemo;
use super::scheduling::scheduling_extras;
use super::{ConvertError, SnapshotBuilder};
use crate::snapshot::model::*;
use crate::snapshot::view::{
    ConditionView, ContainerStatusView, MetaView, OwnerView, PodView, SpecView, StatusView,
};

/// Pod fields that pods of one owner usually have in common; shared (not copied) when equal.
#[derive(Default, Clone)]
pub(super) struct SharedParts {
    labels: Arc<BTreeMap<String, String>>,
    node_selector: Arc<BTreeMap<String, String>>,
    affinity: Option<Arc<core::Affinity>>,
    tolerations: Arc<[core::Toleration]>,
    tsc: Arc<[core::TopologySpreadConstraint]>,
    owners: Arc<[OwnerRef]>,
    images: Arc<[String]>,
    conditions: Arc<[Condition]>,
    /// The conditions `conditions` replaced (see [`shared_conditions`]).
    previous_conditions: Arc<[Condition]>,
    container_states: Arc<[ContainerState]>,
    init_container_states: Arc<[ContainerState]>,
    ephemeral_container_states: Arc<[ContainerState]>,
    local_storage_volume: Option<Arc<str>>,
    scheduling: Option<Arc<SchedulingExtras>>,
    requests: RequestsMemo,
}

impl SharedParts {
    /// Whether a pod still holds these parts (the owner references are given to every pod that
    /// was converted with them, and kept while it lives).
    pub(super) fn in_use(&self) -> bool {
        std::sync::Arc::strong_count(&self.owners) > 1
    }
}

/// The pod's conditions as a shared slice: the `cached` one when equal (most pods of an owner have
/// the same conditions), else `previous` when equal (the two then swap: pods whose readiness
/// flips alternate between two sets, which must not leave each pod with its own copy), else a new
/// one that becomes `cached` (the old `cached` becoming `previous`). Compared before anything is
/// built, so the common case allocates nothing.
fn shared_conditions(
    cached: &mut Arc<[Condition]>,
    previous: &mut Arc<[Condition]>,
    views: &[ConditionView<'_>],
) -> Result<Arc<[Condition]>, ConvertError> {
    let time = |i: usize, c: &ConditionView<'_>| {
        parse_time(&c.last_transition_time, || {
            format!("status.conditions[{i}].lastTransitionTime")
        })
    };
    let same = |x: &Condition, c: &ConditionView<'_>, last_transition: Option<Timestamp>| {
        x.type_.as_str() == c.type_.as_ref()
            && x.status.as_str() == c.status.as_ref()
            && x.reason.as_deref() == c.reason.as_deref()
            && x.last_transition == last_transition
    };
    let mut equal = cached.len() == views.len();
    for (i, c) in views.iter().enumerate() {
        let last_transition = time(i, c)?;
        equal = equal && cached.get(i).is_some_and(|x| same(x, c, last_transition));
    }
    if equal {
        return Ok(cached.clone());
    }
    // Times were all parsed above, so they parse again here.
    let mut equal_previous = previous.len() == views.len();
    for (i, c) in views.iter().enumerate() {
        if !equal_previous {
            break;
        }
        let last_transition = time(i, c)?;
        equal_previous = previous.get(i).is_some_and(|x| same(x, c, last_transition));
    }
    if !equal_previous {
        let mut fresh = Vec::with_capacity(views.len());
        for (i, c) in views.iter().enumerate() {
            fresh.push(Condition {
                type_: c.type_.as_ref().into(),
                status: c.status.as_ref().into(),
                reason: c.reason.as_deref().map(Into::into),
                last_transition: time(i, c)?,
            });
        }
        *previous = Arc::from(fresh);
    }
    std::mem::swap(cached, previous);
    Ok(cached.clone())
}

/// Container states as a shared slice, like [`shared_conditions`].
fn shared_states(
    cached: &mut Arc<[ContainerState]>,
    views: &[ContainerStatusView<'_>],
) -> Arc<[ContainerState]> {
    let equal = cached.len() == views.len()
        && cached
            .iter()
            .zip(views)
            .all(|(a, v)| *a == container_state(v));
    if !equal {
        *cached = views.iter().map(container_state).collect();
    }
    cached.clone()
}

impl SnapshotBuilder {
    /// Adds a pod.
    pub fn add_pod(&mut self, p: &core::Pod) -> Result<(), ConvertError> {
        self.add_pod_view(&PodView::from_pod(p))
    }

    /// Adds a pod from its view (the snapshot loader decodes views straight from JSON).
    pub fn add_pod_view(&mut self, p: &PodView<'_>) -> Result<(), ConvertError> {
        let meta = &p.metadata;
        let name = pod_name(meta)?;
        let namespace = self.intern(meta.namespace.as_deref().unwrap_or("default"));
        let spec = &p.spec;
        let status = &p.status;
        let reason = status.reason.as_deref().map(|r| self.intern(r));
        let scheduler_name = spec
            .scheduler_name
            .as_deref()
            .filter(|s| !s.is_empty() && *s != DEFAULT_SCHEDULER_NAME)
            .map(|s| self.intern(s));
        let owner_views = meta.owner_references.as_deref().unwrap_or(&[]);
        let key = owner_key(owner_views);
        let cache = match self.shared.get_mut(key) {
            Some(c) => c,
            None => self.shared.entry(key.to_string()).or_default(),
        };
        let (requests, qos) = cache.requests.requests_and_qos(
            spec,
            status,
            stated_qos(status.qos_class.as_deref()),
        )?;
        cache.refresh_owners(owner_views);
        cache.refresh_spec_parts(p);
        let states = cache.status_parts(status)?;
        let local_storage_volume = cache.local_storage_volume(spec);
        let scheduling = scheduling_extras(
            &mut cache.scheduling,
            scheduler_name,
            requests.scheduler.clone(),
            spec,
        );
        let affinity = if spec.affinity.is_some() {
            cache.affinity.clone()
        } else {
            None
        };
        let cache = &*cache;
        let creation_timestamp = parse_time(&meta.creation_timestamp, || {
            "metadata.creationTimestamp".into()
        })?;
        let deletion_timestamp = parse_time(&meta.deletion_timestamp, || {
            "metadata.deletionTimestamp".into()
        })?;
        let start_time = parse_time(&status.start_time, || "status.startTime".into())?;
        self.pods.push(Arc::new(Pod {
            uid: meta.uid.as_deref().unwrap_or_default().to_string(),
            name: name.to_string(),
            namespace,
            node_name: non_empty(&spec.node_name).map(Box::from),
            node: None,
            labels: cache.labels.clone(),
            annotations: kept_annotations(meta),
            owners: cache.owners.clone(),
            creation_timestamp,
            deletion_timestamp,
            priority: spec.priority,
            priority_class_name: non_empty(&spec.priority_class_name).map(Arc::from),
            phase: PodPhase::parse(status.phase.as_deref()),
            reason,
            start_time,
            conditions: states.conditions,
            images: cache.images.clone(),
            container_states: states.containers,
            init_container_states: states.init_containers,
            ephemeral_container_states: states.ephemeral_containers,
            requests: requests.spec,
            qos,
            node_selector: cache.node_selector.clone(),
            affinity,
            tolerations: cache.tolerations.clone(),
            topology_spread_constraints: cache.tsc.clone(),
            volumes: volumes(spec),
            local_storage_volume,
            scheduling,
            has_resource_claims: spec.resource_claims,
        }));
        Ok(())
    }
}

/// The uid of the owner whose pods share parts: the controller, else the first owner (`""`
/// for pods without owners, which share one entry).
fn owner_key<'v>(owner_views: &'v [OwnerView<'_>]) -> &'v str {
    owner_views
        .iter()
        .find(|o| o.controller == Some(true))
        .or(owner_views.first())
        .map(|o| o.uid.as_ref())
        .unwrap_or_default()
}

/// `metadata.name`, which a pod must have.
fn pod_name<'v>(meta: &'v MetaView<'_>) -> Result<&'v str, ConvertError> {
    let name = meta.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(ConvertError {
            field: "metadata.name".into(),
            message: "a pod needs a name".into(),
        });
    }
    Ok(name)
}

/// The text of an optional field, unless absent or empty.
fn non_empty<'v>(field: &'v Option<std::borrow::Cow<'_, str>>) -> Option<&'v str> {
    field.as_deref().filter(|s| !s.is_empty())
}

/// The annotations the engine reads (see [`keep_annotation`]).
fn kept_annotations(meta: &MetaView<'_>) -> BTreeMap<String, String> {
    meta.annotations
        .0
        .iter()
        .filter(|(k, _)| keep_annotation(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The QoS class the pod's status states, if one of the three.
fn stated_qos(class: Option<&str>) -> Option<QosClass> {
    match class {
        Some("BestEffort") => Some(QosClass::BestEffort),
        Some("Guaranteed") => Some(QosClass::Guaranteed),
        Some("Burstable") => Some(QosClass::Burstable),
        _ => None,
    }
}

/// The kinds of the pod's volumes.
fn volumes(spec: &SpecView<'_>) -> Box<[Volume]> {
    spec.volumes
        .iter()
        .map(|v| {
            if v.host_path {
                Volume::HostPath
            } else if v.empty_dir {
                Volume::EmptyDir
            } else if let Some(c) = &v.persistent_volume_claim {
                Volume::Pvc(c.claim_name.to_string())
            } else if v.ephemeral {
                Volume::Ephemeral(v.name.to_string())
            } else {
                Volume::Other
            }
        })
        .collect()
}

/// A pod's conditions and container states, shared with the pods before it where equal.
struct StatusParts {
    conditions: Arc<[Condition]>,
    containers: Arc<[ContainerState]>,
    init_containers: Arc<[ContainerState]>,
    ephemeral_containers: Arc<[ContainerState]>,
}

impl SharedParts {
    /// Replaces the owner references with the pod's unless equal.
    fn refresh_owners(&mut self, owner_views: &[OwnerView<'_>]) {
        let owners_equal = self.owners.len() == owner_views.len()
            && self.owners.iter().zip(owner_views).all(|(a, b)| {
                a.uid == b.uid
                    && a.name == b.name
                    && a.kind == b.kind
                    && a.api_version == b.api_version
                    && a.controller == b.controller.unwrap_or(false)
            });
        if !owners_equal {
            self.owners = owner_views
                .iter()
                .map(|o| OwnerRef {
                    api_version: o.api_version.to_string(),
                    kind: o.kind.to_string(),
                    name: o.name.to_string(),
                    uid: o.uid.to_string(),
                    controller: o.controller.unwrap_or(false),
                })
                .collect();
        }
    }

    /// Replaces the labels, node selector, affinity, tolerations, spread constraints and images
    /// with the pod's where they differ.
    fn refresh_spec_parts(&mut self, p: &PodView<'_>) {
        let spec = &p.spec;
        if !p.metadata.labels.equals(&self.labels) {
            self.labels = Arc::new(p.metadata.labels.to_map());
        }
        if !spec.node_selector.equals(&self.node_selector) {
            self.node_selector = Arc::new(spec.node_selector.to_map());
        }
        match spec.affinity.as_deref() {
            None => {}
            Some(a) if self.affinity.as_deref() == Some(a) => {}
            Some(a) => self.affinity = Some(Arc::new(a.clone())),
        }
        let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
        if *self.tolerations != *tolerations {
            self.tolerations = Arc::from(tolerations);
        }
        let tsc = spec.topology_spread_constraints.as_deref().unwrap_or(&[]);
        if *self.tsc != *tsc {
            self.tsc = Arc::from(tsc);
        }
        let images_equal = self.images.len()
            == spec.containers.iter().filter(|c| c.image.is_some()).count()
            && self
                .images
                .iter()
                .zip(spec.containers.iter().filter_map(|c| c.image.as_deref()))
                .all(|(a, b)| a == b);
        if !images_equal {
            self.images = spec
                .containers
                .iter()
                .filter_map(|c| c.image.as_deref().map(str::to_string))
                .collect();
        }
    }

    /// The pod's conditions and container states (see [`shared_conditions`]).
    fn status_parts(&mut self, status: &StatusView<'_>) -> Result<StatusParts, ConvertError> {
        Ok(StatusParts {
            conditions: shared_conditions(
                &mut self.conditions,
                &mut self.previous_conditions,
                &status.conditions,
            )?,
            containers: shared_states(&mut self.container_states, &status.container_statuses),
            init_containers: shared_states(
                &mut self.init_container_states,
                &status.init_container_statuses,
            ),
            ephemeral_containers: shared_states(
                &mut self.ephemeral_container_states,
                &status.ephemeral_container_statuses,
            ),
        })
    }

    /// The name of the pod's first hostPath or emptyDir volume, shared when equal.
    fn local_storage_volume(&mut self, spec: &SpecView<'_>) -> Option<Arc<str>> {
        spec.volumes
            .iter()
            .find(|v| v.host_path || v.empty_dir)
            .map(|v| v.name.as_ref())
            .filter(|n| !n.is_empty())
            .map(|name| match &self.local_storage_volume {
                Some(a) if **a == *name => a.clone(),
                _ => {
                    let a: Arc<str> = Arc::from(name);
                    self.local_storage_volume = Some(a.clone());
                    a
                }
            })
    }
}

fn parse_time(
    t: &Option<std::borrow::Cow<'_, str>>,
    field: impl FnOnce() -> String,
) -> Result<Option<Timestamp>, ConvertError> {
    match t.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => match parse_utc_seconds(text) {
            Some(ts) => Ok(Some(ts)),
            None => text
                .parse::<Timestamp>()
                .map(Some)
                .map_err(|e| ConvertError {
                    field: field(),
                    message: format!("expected an RFC 3339 time, got {text:?}: {e}"),
                }),
        },
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, the form the API server writes, read without the general RFC 3339
/// parser (same result). `None` for any other form or an invalid date: the caller falls back.
fn parse_utc_seconds(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 (proleptic Gregorian, the "days from civil" method).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Timestamp::from_second(days * 86_400 + hour * 3_600 + minute * 60 + second).ok()
}

fn container_state(c: &ContainerStatusView<'_>) -> ContainerState {
    let state = c.state.as_ref();
    ContainerState {
        name: c.name.as_ref().into(),
        restart_count: c.restart_count,
        ready: c.ready,
        waiting_reason: state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            .map(Into::into),
        terminated_reason: state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.as_deref())
            .map(Into::into),
        terminated_exit_code: state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.exit_code),
        last_terminated_exit_code: c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.exit_code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_time_parser_agrees_with_jiff() {
        let mut texts: Vec<String> = [
            "1970-01-01T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "0000-03-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "1600-02-29T12:00:00Z",
            "1900-02-29T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "2024-02-29T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-12-31T23:59:60Z",
            "2026-01-01T24:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00:00+01:00",
            "2026-01-01T00:00:00.5Z",
            "2026-1-01T00:00:00Z",
            "+002026-01-01T00:00:0Z",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for year in [
            1, 4, 99, 100, 399, 400, 1583, 1970, 1999, 2001, 2100, 2400, 2026,
        ] {
            for month in 1..=12 {
                for day in [1, 15, 28, 29, 30, 31] {
                    texts.push(format!("{year:04}-{month:02}-{day:02}T13:07:59Z"));
                }
            }
        }
        for text in &texts {
            let fast = parse_utc_seconds(text);
            let general = text.parse::<Timestamp>().ok();
            if let Some(t) = fast {
                assert_eq!(Some(t), general, "{text}");
            }
            assert_eq!(
                parse_time(&Some(text.as_str().into()), String::new)
                    .ok()
                    .flatten(),
                general,
                "{text}"
            );
        }
        assert!(parse_utc_seconds("2026-01-27T00:00:00Z").is_some());
        assert!(parse_utc_seconds("2024-02-29T00:00:00Z").is_some());
    }
}

#[cfg(test)]
mod local_storage_tests {
    use super::*;

    /// The local-storage volume's name is the same whichever way the pod was decoded: the fast
    /// reader, serde, or a typed Kubernetes Pod (live mode).
    #[test]
    fn every_decode_path_keeps_the_first_local_volume_name() {
        let texts = [
            (
                r#"{"metadata":{"name":"a"},"spec":{"volumes":[{"name":"cfg","configMap":{"name":"x"}},
                {"name":"cache","emptyDir":{}},{"name":"logs","hostPath":{"path":"/l"}}]}}"#,
                Some("cache"),
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"volumes":[{"name":"logs","hostPath":{"path":"/l"}}]}}"#,
                Some("logs"),
            ),
            // An escaped name: left to serde by the fast reader, decoded the same.
            (
                r#"{"metadata":{"name":"a"},"spec":{"volumes":[{"name":"c\u0061che","emptyDir":{}}]}}"#,
                Some("cache"),
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"volumes":[{"name":"p","persistentVolumeClaim":{"claimName":"d"}}]}}"#,
                None,
            ),
        ];
        for (text, want) in texts {
            let typed: core::Pod = match serde_json::from_str(text) {
                Ok(p) => p,
                Err(e) => panic!("{e}: {text}"),
            };
            let serde_view: PodView<'_> = match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => panic!("{e}: {text}"),
            };
            let name_of = |v: &PodView<'_>| {
                let mut b = SnapshotBuilder::new();
                b.add_pod_view(v).expect("a valid pod");
                b.build().pods[0].local_storage_volume.clone()
            };
            let mut fast_view = PodView::default();
            if fast_view.fill_from_json(text) {
                assert_eq!(name_of(&fast_view).as_deref(), want, "fast: {text}");
            } else {
                assert!(
                    text.contains("\\u"),
                    "only the escaped name needs serde: {text}"
                );
            }
            assert_eq!(name_of(&serde_view).as_deref(), want, "serde: {text}");
            assert_eq!(
                name_of(&PodView::from_pod(&typed)).as_deref(),
                want,
                "typed: {text}"
            );
        }
    }
}

#[cfg(test)]
mod sharing_tests {
    use super::*;

    fn pod(name: &str, ready: &str) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-1","controller":true}}]}},
            "spec":{{"nodeName":"n1"}},
            "status":{{"conditions":[{{"type":"Ready","status":"{ready}","lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}}"#
        )
    }

    /// Pods of one owner whose readiness alternates (as when readiness flaps while watch events
    /// arrive) share two condition sets, not one copy per pod; a third set is still built.
    #[test]
    fn conditions_that_alternate_between_two_sets_stay_shared() {
        let mut b = SnapshotBuilder::new();
        for (i, ready) in ["True", "False", "True", "False", "True", "Unknown"]
            .iter()
            .enumerate()
        {
            let text = pod(&format!("p{i}"), ready);
            let mut view = PodView::default();
            assert!(view.fill_from_json(&text), "{text}");
            b.add_pod_view(&view).expect("a valid pod");
        }
        let pods = b.build().pods;
        let conditions = |i: usize| pods[i].conditions.clone();
        for (a, b) in [(0, 2), (2, 4), (1, 3)] {
            assert!(
                Arc::ptr_eq(&conditions(a), &conditions(b)),
                "pods {a} and {b}"
            );
        }
        assert!(!Arc::ptr_eq(&conditions(0), &conditions(1)));
        assert_eq!(conditions(1)[0].status, "False");
        assert_eq!(conditions(4)[0].status, "True");
        assert_eq!(conditions(5)[0].status, "Unknown");
        for i in 0..5 {
            assert!(!Arc::ptr_eq(&conditions(i), &conditions(5)), "pod {i}");
        }
    }
}
