//! A fast decoder for [`PodView`]: a small hand-written JSON reader for the shape pods have in
//! practice (no escapes in strings, strings where strings belong). It accepts only input that the
//! serde decoder accepts and gives the same view for it; anything else (escapes, duplicate keys,
//! numbers or booleans in string maps, invalid JSON, ...) returns `None` and the caller decodes
//! with serde, which gives the same result or the usual error with its field path.

use std::borrow::Cow;

use k8s_openapi::api::core::v1 as core;

use super::reader::{Reader, Seen};
use super::{
    ClaimView, ConditionView, ContainerStatusView, ContainerView, MetaView, OwnerView, PodView,
    PortView, ResourcesView, SpecView, StateDetailView, StateView, StatusView, VolumeView,
};

/// Decodes a pod; `None` when the fast path does not apply (see the module docs).
pub fn pod_view(text: &str) -> Option<PodView<'_>> {
    let mut v = PodView::default();
    pod_view_into(text, &mut v)?;
    Some(v)
}

/// Decodes a pod into `v`, which must be empty (the default view); `None` when the fast path
/// does not apply, and then `v` holds a partial view. Filling in place saves moving the large view.
pub fn pod_view_into<'a>(text: &'a str, v: &mut PodView<'a>) -> Option<()> {
    let mut p = Reader {
        s: text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut seen = Seen(0);
    p.object(|p, key| match key {
        // The large parts are filled in place rather than returned (fewer copies).
        "metadata" => {
            seen.first(0)?;
            p.meta(&mut v.metadata)
        }
        "spec" => {
            seen.first(1)?;
            p.spec(&mut v.spec)
        }
        "status" => {
            seen.first(2)?;
            p.status(&mut v.status)
        }
        _ => p.skip(0),
    })?;
    p.ws();
    (p.i == p.b.len()).then_some(())
}

impl<'a> Reader<'a> {
    fn meta(&mut self, m: &mut MetaView<'a>) -> Option<()> {
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "name" => {
                    seen.first(0)?;
                    m.name = p.opt_str()?;
                }
                "namespace" => {
                    seen.first(1)?;
                    m.namespace = p.opt_str()?;
                }
                "uid" => {
                    seen.first(2)?;
                    m.uid = p.opt_str()?;
                }
                "labels" => {
                    seen.first(3)?;
                    m.labels = p.pairs()?;
                }
                "annotations" => {
                    seen.first(4)?;
                    m.annotations = p.pairs()?;
                }
                "ownerReferences" => {
                    seen.first(5)?;
                    m.owner_references = p.opt(|p| p.vec(Self::owner))?;
                }
                "creationTimestamp" => {
                    seen.first(6)?;
                    m.creation_timestamp = p.opt_str()?;
                }
                "deletionTimestamp" => {
                    seen.first(7)?;
                    m.deletion_timestamp = p.opt_str()?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })
    }

    fn owner(&mut self) -> Option<OwnerView<'a>> {
        let mut o = OwnerView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "apiVersion" => {
                    seen.first(0)?;
                    o.api_version = p.cow()?;
                }
                "kind" => {
                    seen.first(1)?;
                    o.kind = p.cow()?;
                }
                "name" => {
                    seen.first(2)?;
                    o.name = p.cow()?;
                }
                "uid" => {
                    seen.first(3)?;
                    o.uid = p.cow()?;
                }
                "controller" => {
                    seen.first(4)?;
                    o.controller = p.opt(Self::boolean)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(o)
    }

    fn resources(&mut self) -> Option<ResourcesView<'a>> {
        let mut r = ResourcesView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "requests" => {
                    seen.first(0)?;
                    r.requests = p.pairs()?;
                }
                "limits" => {
                    seen.first(1)?;
                    r.limits = p.pairs()?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(r)
    }

    fn container(&mut self) -> Option<ContainerView<'a>> {
        let mut c = ContainerView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "name" => {
                    seen.first(4)?;
                    c.name = p.cow()?;
                }
                "image" => {
                    seen.first(0)?;
                    c.image = p.opt_str()?;
                }
                "resources" => {
                    seen.first(1)?;
                    c.resources = p.opt(Self::resources)?;
                }
                "restartPolicy" => {
                    seen.first(2)?;
                    c.restart_policy = p.opt_str()?;
                }
                "ports" => {
                    seen.first(3)?;
                    // As serde: null or a list; only ports with a host port are kept.
                    p.opt(|p| {
                        p.array(|p| {
                            let port = p.port()?;
                            if port.binds_host_port() {
                                c.host_ports.push(port);
                            }
                            Some(())
                        })
                    })?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn port(&mut self) -> Option<PortView<'a>> {
        let mut port = PortView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "hostPort" => {
                    seen.first(0)?;
                    port.host_port = p.opt(Self::int32)?;
                }
                "protocol" => {
                    seen.first(1)?;
                    port.protocol = p.opt_str()?;
                }
                "hostIP" => {
                    seen.first(2)?;
                    port.host_ip = p.opt_str()?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(port)
    }

    fn volume(&mut self) -> Option<VolumeView<'a>> {
        let mut v = VolumeView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "name" => {
                    seen.first(0)?;
                    v.name = p.cow()?;
                }
                "hostPath" => {
                    seen.first(1)?;
                    v.host_path = p.present()?;
                }
                "emptyDir" => {
                    seen.first(2)?;
                    v.empty_dir = p.present()?;
                }
                "ephemeral" => {
                    seen.first(3)?;
                    v.ephemeral = p.present()?;
                }
                "persistentVolumeClaim" => {
                    seen.first(4)?;
                    v.persistent_volume_claim = p.opt(|p| {
                        let mut claim = ClaimView::default();
                        let mut seen = Seen(0);
                        p.object(|p, key| {
                            if key == "claimName" {
                                seen.first(0)?;
                                claim.claim_name = p.cow()?;
                                Some(())
                            } else {
                                p.skip(0)
                            }
                        })?;
                        Some(claim)
                    })?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(v)
    }

    fn spec(&mut self, s: &mut SpecView<'a>) -> Option<()> {
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "nodeName" => {
                    seen.first(0)?;
                    s.node_name = p.opt_str()?;
                }
                "priority" => {
                    seen.first(1)?;
                    s.priority = p.opt(Self::int32)?;
                }
                "priorityClassName" => {
                    seen.first(2)?;
                    s.priority_class_name = p.opt_str()?;
                }
                "nodeSelector" => {
                    seen.first(3)?;
                    s.node_selector = p.pairs()?;
                }
                "affinity" => {
                    seen.first(4)?;
                    s.affinity = p.opt(Self::typed::<core::Affinity>)?.map(Cow::Owned);
                }
                "tolerations" => {
                    seen.first(5)?;
                    s.tolerations = p.opt(Self::typed::<Vec<core::Toleration>>)?.map(Cow::Owned);
                }
                "topologySpreadConstraints" => {
                    seen.first(6)?;
                    s.topology_spread_constraints = p
                        .opt(Self::typed::<Vec<core::TopologySpreadConstraint>>)?
                        .map(Cow::Owned);
                }
                "containers" => {
                    seen.first(7)?;
                    s.containers = p.vec(Self::container)?;
                }
                "initContainers" => {
                    seen.first(8)?;
                    s.init_containers = p.vec(Self::container)?;
                }
                "overhead" => {
                    seen.first(9)?;
                    s.overhead = p.pairs()?;
                }
                "volumes" => {
                    seen.first(10)?;
                    s.volumes = p.vec(Self::volume)?;
                }
                "resourceClaims" => {
                    seen.first(11)?;
                    let mut count = 0usize;
                    let claims = p.opt(|p| {
                        p.array(|p| {
                            count += 1;
                            p.skip(0)
                        })
                    })?;
                    s.resource_claims = claims.is_some() && count > 0;
                }
                "terminationGracePeriodSeconds" => {
                    seen.first(12)?;
                    s.sets_grace_period = true;
                    p.skip(0)?;
                }
                "schedulerName" => {
                    seen.first(13)?;
                    s.scheduler_name = p.opt_str()?;
                }
                "resources" => {
                    seen.first(14)?;
                    s.resources = p.opt(Self::resources)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(())
    }

    fn condition(&mut self) -> Option<ConditionView<'a>> {
        let mut c = ConditionView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "type" => {
                    seen.first(0)?;
                    c.type_ = p.cow()?;
                }
                "status" => {
                    seen.first(1)?;
                    c.status = p.cow()?;
                }
                "reason" => {
                    seen.first(2)?;
                    c.reason = p.opt_str()?;
                }
                "lastTransitionTime" => {
                    seen.first(3)?;
                    c.last_transition_time = p.opt_str()?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn state_detail(&mut self) -> Option<StateDetailView<'a>> {
        let mut d = StateDetailView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "reason" => {
                    seen.first(0)?;
                    d.reason = p.opt_str()?;
                }
                "exitCode" => {
                    seen.first(1)?;
                    d.exit_code = p.opt(Self::int32)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(d)
    }

    fn state(&mut self) -> Option<StateView<'a>> {
        let mut s = StateView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "waiting" => {
                    seen.first(0)?;
                    s.waiting = p.opt(Self::state_detail)?;
                }
                "terminated" => {
                    seen.first(1)?;
                    s.terminated = p.opt(Self::state_detail)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(s)
    }

    fn container_status(&mut self) -> Option<ContainerStatusView<'a>> {
        let mut c = ContainerStatusView::default();
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "name" => {
                    seen.first(0)?;
                    c.name = p.cow()?;
                }
                "restartCount" => {
                    seen.first(1)?;
                    c.restart_count = p.int32()?;
                }
                "ready" => {
                    seen.first(2)?;
                    c.ready = p.boolean()?;
                }
                "state" => {
                    seen.first(3)?;
                    c.state = p.opt(Self::state)?;
                }
                "lastState" => {
                    seen.first(4)?;
                    c.last_state = p.opt(Self::state)?;
                }
                "allocatedResources" => {
                    seen.first(5)?;
                    c.allocated_resources = p.pairs()?;
                }
                "resources" => {
                    seen.first(6)?;
                    c.resources = p.opt(Self::resources)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn status(&mut self, s: &mut StatusView<'a>) -> Option<()> {
        let mut seen = Seen(0);
        self.object(|p, key| {
            match key {
                "phase" => {
                    seen.first(0)?;
                    s.phase = p.opt_str()?;
                }
                "reason" => {
                    seen.first(1)?;
                    s.reason = p.opt_str()?;
                }
                "startTime" => {
                    seen.first(2)?;
                    s.start_time = p.opt_str()?;
                }
                "qosClass" => {
                    seen.first(3)?;
                    s.qos_class = p.opt_str()?;
                }
                "conditions" => {
                    seen.first(4)?;
                    s.conditions = p.vec(Self::condition)?;
                }
                "containerStatuses" => {
                    seen.first(5)?;
                    s.container_statuses = p.vec(Self::container_status)?;
                }
                "initContainerStatuses" => {
                    seen.first(6)?;
                    s.init_container_statuses = p.vec(Self::container_status)?;
                }
                "ephemeralContainerStatuses" => {
                    seen.first(7)?;
                    s.ephemeral_container_statuses = p.vec(Self::container_status)?;
                }
                "allocatedResources" => {
                    seen.first(8)?;
                    s.allocated_resources = p.pairs()?;
                }
                "resources" => {
                    seen.first(9)?;
                    s.resources = p.opt(Self::resources)?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast decoder's contract: when it answers, serde accepts the text and gives the same view.
    fn agrees(text: &str) -> bool {
        let Some(fast) = pod_view(text) else {
            return false;
        };
        match serde_json::from_str::<PodView>(text) {
            Ok(slow) => assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{text}"),
            Err(e) => panic!("the fast decoder accepted what serde rejects ({e}): {text}"),
        }
        true
    }

    const FULL: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop",
        "uid":"u-1","labels":{"app":"web","tier":"front"},"annotations":{"kubernetes.io/config.source":"api",
        "x":"y"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"rs-1",
        "controller":true,"blockOwnerDeletion":true}],"creationTimestamp":"2026-01-01T00:00:00Z",
        "deletionTimestamp":null,"managedFields":[{"a":[1,-2.5e+3,0.5,true,false,null,{}]}]},
        "spec":{"nodeName":"n1","priority":-7,"priorityClassName":"high","nodeSelector":{"disk":"ssd"},
        "affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":
        {"matchLabels":{"app":"web"}},"topologyKey":"kubernetes.io/hostname"}]}},
        "tolerations":[{"operator":"Exists","effect":"NoSchedule","tolerationSeconds":300}],
        "topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}],
        "containers":[{"name":"c","image":"img:1","resources":{"requests":{"cpu":"100m","memory":"1Gi"},
        "limits":{"cpu":"1"}},"ports":[{"containerPort":80}]},{"name":"d","resources":null}],
        "initContainers":[{"name":"i","image":"init","restartPolicy":"Always","resources":{"requests":{"cpu":"5m"}}}],
        "overhead":{"memory":"10Mi"},"volumes":[{"name":"h","hostPath":{"path":"/x"}},{"name":"e","emptyDir":{}},
        {"name":"p","persistentVolumeClaim":{"claimName":"data","readOnly":false}},{"name":"g","ephemeral":{"x":1}},
        {"name":"c","configMap":{"name":"cm"},"hostPath":null}],"resourceClaims":[{"name":"gpu"}]},
        "status":{"phase":"Running","reason":"Evicted","startTime":"2026-01-02T03:04:05Z","qosClass":"Burstable",
        "conditions":[{"type":"Ready","status":"True","reason":"ok","lastTransitionTime":"2026-01-02T03:04:05Z"}],
        "containerStatuses":[{"name":"c","restartCount":3,"ready":true,"image":"img","state":{"running":{}},
        "lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}],
        "initContainerStatuses":[{"name":"i","restartCount":0,"ready":false,"state":{"waiting":{"reason":"X"}}}],
        "ephemeralContainerStatuses":[]}}"#;

    #[test]
    fn a_grace_period_counts_as_set_only_in_the_spec_and_whatever_its_value() {
        let sets = |text: &str| {
            assert!(agrees(text), "{text}");
            pod_view(text).unwrap().spec.sets_grace_period
        };
        assert!(sets(r#"{"spec":{"terminationGracePeriodSeconds":45}}"#));
        assert!(sets(r#"{"spec":{"terminationGracePeriodSeconds":null}}"#));
        assert!(!sets(r#"{"spec":{"nodeName":"n1"}}"#));
        assert!(!sets(
            r#"{"metadata":{"annotations":{"terminationGracePeriodSeconds":"5"}},"status":{"terminationGracePeriodSeconds":5}}"#
        ));
        // Twice: serde rejects the repeated field, so the fast path must give up.
        assert!(
            pod_view(
                r#"{"spec":{"terminationGracePeriodSeconds":1,"terminationGracePeriodSeconds":2}}"#
            )
            .is_none()
        );
    }

    #[test]
    fn decodes_every_field_as_serde_does() {
        assert!(agrees(FULL), "the full pod takes the fast path");
        let v = pod_view(FULL).unwrap();
        assert_eq!(v.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(v.spec.priority, Some(-7));
        assert!(v.spec.affinity.is_some() && v.spec.resource_claims);
        assert_eq!(v.spec.volumes.len(), 5);
        assert!(v.spec.volumes[0].host_path && !v.spec.volumes[4].host_path);
        assert_eq!(v.status.container_statuses[0].restart_count, 3);
        assert!(!v.spec.sets_grace_period);
        for text in [
            "{}",
            r#"{"spec":{"terminationGracePeriodSeconds":45}}"#,
            r#"{"spec":{"terminationGracePeriodSeconds":null}}"#,
            r#"{"metadata":{"labels":null,"ownerReferences":null},"spec":{"resourceClaims":[]}}"#,
            r#"{"spec":{"priority":null,"affinity":null,"tolerations":null,"resourceClaims":null}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":0,"lastState":{"terminated":null}}]}}"#,
            " \n{ \"metadata\" : { \"name\" : \"a\" } } \t",
        ] {
            assert!(agrees(text), "{text}");
        }
    }

    #[test]
    fn reads_the_scheduler_name_and_only_host_ports() {
        let text = r#"{"spec":{"schedulerName":"bin-packer","containers":[{"name":"c","ports":[
            {"containerPort":80,"hostPort":8080,"protocol":"UDP","hostIP":"10.0.0.1","name":"x"},
            {"containerPort":81},{"containerPort":82,"hostPort":0},{"hostPort":null}]},
            {"name":"d","ports":null},{"name":"e","ports":[]}],
            "initContainers":[{"restartPolicy":"Always","ports":[{"hostPort":53}]}]}}"#;
        assert!(agrees(text), "{text}");
        let v = pod_view(text).unwrap();
        assert_eq!(v.spec.scheduler_name.as_deref(), Some("bin-packer"));
        let ports = &v.spec.containers[0].host_ports;
        assert_eq!(ports.len(), 1, "only ports with a host port are kept");
        assert_eq!(ports[0].host_port, Some(8080));
        assert_eq!(ports[0].protocol.as_deref(), Some("UDP"));
        assert_eq!(ports[0].host_ip.as_deref(), Some("10.0.0.1"));
        assert!(v.spec.containers[1].host_ports.is_empty());
        assert_eq!(v.spec.init_containers[0].host_ports[0].host_port, Some(53));
        for odd in [
            r#"{"spec":{"containers":[{"ports":[{"hostPort":"80"}]}]}}"#,
            r#"{"spec":{"containers":[{"ports":[{"hostPort":80,"hostPort":81}]}]}}"#,
            r#"{"spec":{"containers":[{"ports":{}}]}}"#,
            r#"{"spec":{"schedulerName":7}}"#,
        ] {
            assert!(pod_view(odd).is_none(), "{odd}");
        }
    }

    #[test]
    fn leaves_unusual_input_to_serde() {
        // Each is either rejected by serde or decoded differently than plain strings would be.
        for text in [
            r#"{"metadata":{"name":"a\"b"}}"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            r#"{"metadata":{"labels":{"a":1}}}"#,
            r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":0.5}}}]}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":-0}]}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":1.0}]}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":1e2}]}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":01}]}}"#,
            r#"{"status":{"containerStatuses":[{"restartCount":3000000000}]}}"#,
            r#"{"status":{"containerStatuses":[{"ready":null}]}}"#,
            r#"{"spec":{"containers":null}}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":{"name":"a",}}"#,
            r#"{"metadata":{"x":[1,]}}"#,
            r#"{"metadata":{"x":01}}"#,
            r#"{"metadata":{"x":-}}"#,
            r#"{"metadata":{"x":1.}}"#,
            r#"{"metadata":{"x":tru}}"#,
            "{\"metadata\":{\"name\":\"a\u{1}\"}}",
            r#"{"metadata":{}} x"#,
            r#"{"metadata":{}"#,
            r#"{"spec":{"affinity":{"nodeAffinity":7}}}"#,
            r#"{"spec":{"resourceClaims":{}}}"#,
            r#"{"metadata":[]}"#,
        ] {
            assert!(pod_view(text).is_none(), "{text}");
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(pod_view(&deep).is_none());
    }

    #[test]
    fn never_accepts_what_serde_rejects_nor_decodes_differently() {
        // Single-byte edits of a full pod: the fast path may give up, but must never disagree.
        let bytes = FULL.as_bytes();
        let alphabet = b"\"\\{}[]:, 0-1.eEtfnu\x01a";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut fast_answers = 0;
        for _ in 0..4000 {
            let mut edited = bytes.to_vec();
            let at = (next() % bytes.len() as u64) as usize;
            let c = alphabet[(next() % alphabet.len() as u64) as usize];
            match next() % 3 {
                0 => edited[at] = c,
                1 => edited.insert(at, c),
                _ => {
                    edited.remove(at);
                }
            }
            let Ok(text) = std::str::from_utf8(&edited) else {
                continue;
            };
            if agrees(text) {
                fast_answers += 1;
            }
        }
        assert!(
            fast_answers > 100,
            "edits inside strings keep the fast path"
        );
    }

    #[test]
    fn takes_the_fast_path_for_generated_pods() {
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let bytes = crate::testing::synthetic_cluster_json(20, 600, 11);
        let text = std::str::from_utf8(&bytes).unwrap();
        let list: List = serde_json::from_str(text).unwrap();
        let pods: Vec<&str> = list
            .items
            .iter()
            .map(|r| r.get())
            .filter(|t| t.contains("\"kind\":\"Pod\""))
            .collect();
        assert!(pods.len() >= 500);
        for pod in pods {
            assert!(agrees(pod), "{pod}");
        }
    }
}
