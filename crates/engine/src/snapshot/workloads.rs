//! Lean decoding of ReplicaSets and Deployments: only the fields the guard's facts read are
//! decoded (the pod template's spec, the selector and every other field are skipped), then the
//! facts are built by the same constructors the webhook uses on full API objects.
//!
//! Decoding full k8s-openapi objects costs several times more than this (a ReplicaSet or a
//! Deployment is about twenty thousand instructions), and a large cluster has tens of thousands
//! of them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, DeploymentStrategy,
    ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Deserialize;

use super::json::{LeanCondition, decode_json as decode};
use crate::workload::{DeploymentFacts, ReplicaSetFacts};

/// The metadata fields the facts read.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<Owner>>,
}

/// An owner reference. Like k8s-openapi, an absent or null required field decodes as empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Owner {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    controller: Option<bool>,
}

impl Meta {
    fn into_object_meta(self) -> ObjectMeta {
        ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            generation: self.generation,
            labels: self.labels,
            annotations: self.annotations,
            owner_references: self.owner_references.map(|refs| {
                refs.into_iter()
                    .map(|o| OwnerReference {
                        api_version: o.api_version.unwrap_or_default(),
                        kind: o.kind.unwrap_or_default(),
                        name: o.name.unwrap_or_default(),
                        uid: o.uid.unwrap_or_default(),
                        controller: o.controller,
                        block_owner_deletion: None,
                    })
                    .collect()
            }),
            ..ObjectMeta::default()
        }
    }
}

#[derive(Deserialize)]
struct LeanReplicaSet {
    metadata: Option<Meta>,
    spec: Option<ReplicaSetSpecFields>,
    status: Option<ReplicaSetStatusFields>,
}

#[derive(Deserialize)]
struct ReplicaSetSpecFields {
    replicas: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaSetStatusFields {
    replicas: Option<i32>,
    ready_replicas: Option<i32>,
}

#[derive(Deserialize)]
struct LeanDeployment {
    metadata: Option<Meta>,
    spec: Option<DeploymentSpecFields>,
    status: Option<DeploymentStatusFields>,
}

#[derive(Deserialize)]
struct DeploymentSpecFields {
    replicas: Option<i32>,
    strategy: Option<DeploymentStrategy>,
    paused: Option<bool>,
    template: Option<TemplateFields>,
}

/// The pod template's metadata (its `restartedAt` annotation); the spec is skipped.
#[derive(Deserialize)]
struct TemplateFields {
    metadata: Option<TemplateMeta>,
}

#[derive(Deserialize)]
struct TemplateMeta {
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeploymentStatusFields {
    observed_generation: Option<i64>,
    replicas: Option<i32>,
    updated_replicas: Option<i32>,
    ready_replicas: Option<i32>,
    available_replicas: Option<i32>,
    conditions: Option<Vec<LeanCondition>>,
}

/// Decodes a ReplicaSet's facts from its JSON.
pub fn replica_set_facts(raw: &str) -> Result<ReplicaSetFacts, String> {
    let lean: LeanReplicaSet = decode(raw)?;
    let rs = ReplicaSet {
        metadata: lean.metadata.unwrap_or_default().into_object_meta(),
        spec: ReplicaSetSpec {
            replicas: lean.spec.and_then(|s| s.replicas),
            ..ReplicaSetSpec::default()
        },
        status: lean.status.map(|s| ReplicaSetStatus {
            replicas: s.replicas.unwrap_or_default(),
            ready_replicas: s.ready_replicas,
            ..ReplicaSetStatus::default()
        }),
    };
    Ok(ReplicaSetFacts::from_replica_set(&rs))
}

/// Decodes a Deployment's facts from its JSON.
pub fn deployment_facts(raw: &str) -> Result<DeploymentFacts, String> {
    let lean: LeanDeployment = decode(raw)?;
    let spec = lean
        .spec
        .map_or_else(DeploymentSpec::default, |s| DeploymentSpec {
            replicas: s.replicas,
            strategy: s.strategy,
            paused: s.paused,
            template: PodTemplateSpec {
                metadata: s.template.and_then(|t| t.metadata).map(|m| ObjectMeta {
                    annotations: m.annotations,
                    ..ObjectMeta::default()
                }),
                spec: None,
            },
            ..DeploymentSpec::default()
        });
    let d = Deployment {
        metadata: lean.metadata.unwrap_or_default().into_object_meta(),
        spec,
        status: lean.status.map(|s| DeploymentStatus {
            observed_generation: s.observed_generation,
            replicas: s.replicas,
            updated_replicas: s.updated_replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: s.available_replicas,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| DeploymentCondition {
                        type_: c.type_,
                        status: c.status,
                        reason: c.reason,
                        ..DeploymentCondition::default()
                    })
                    .collect()
            }),
            ..DeploymentStatus::default()
        }),
    };
    Ok(DeploymentFacts::from_deployment(&d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_rs(raw: &str) -> ReplicaSetFacts {
        ReplicaSetFacts::from_replica_set(&serde_json::from_str(raw).expect("valid ReplicaSet"))
    }

    fn full_deploy(raw: &str) -> DeploymentFacts {
        DeploymentFacts::from_deployment(&serde_json::from_str(raw).expect("valid Deployment"))
    }

    const RS: &[&str] = &[
        r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"u1",
            "labels":{"app":"web","pod-template-hash":"abc"},
            "annotations":{"deployment.kubernetes.io/revision":" 7 ","other":"x"},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d1","controller":true,"blockOwnerDeletion":true}],
            "managedFields":[{"manager":"kube-controller-manager","operation":"Update"}]},
           "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
                   "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"1"}}}]}}},
           "status":{"replicas":3,"readyReplicas":2,"availableReplicas":2,"observedGeneration":4}}"#,
        // Defaults: no spec replicas (1), no status, a non-controller owner, a bad revision.
        r#"{"kind":"ReplicaSet","metadata":{"name":"orphan","namespace":"ns","uid":"u2",
            "annotations":{"deployment.kubernetes.io/revision":"seven"},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"x","uid":"d2","controller":false}]},
           "spec":{"selector":{}}}"#,
        r#"{"kind":"ReplicaSet","metadata":{"name":"bare"},"spec":{"replicas":0,"selector":{}},"status":{"replicas":0}}"#,
        // Nulls where k8s-openapi accepts them.
        r#"{"kind":"ReplicaSet","metadata":null,"spec":null,"status":{"replicas":null,"readyReplicas":null}}"#,
        r#"{"kind":"ReplicaSet","metadata":{"name":"n","ownerReferences":[{"kind":null,"name":"d","uid":"u","controller":true}]}}"#,
    ];

    const DEPLOYMENTS: &[&str] = &[
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"d1","generation":5,
            "annotations":{"deployment.kubernetes.io/revision":"3",
                           "kube-descheduler.io/restarted-at":"2026-01-01T00:00:00Z",
                           "kube-descheduler.io/restarted-by":"webhook-0"}},
           "spec":{"replicas":1,"paused":false,"selector":{"matchLabels":{"app":"web"}},
                   "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"50%","maxUnavailable":0}},
                   "template":{"metadata":{"labels":{"app":"web"},
                                           "annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}},
                               "spec":{"containers":[{"name":"c","image":"i"}]}}},
           "status":{"observedGeneration":4,"replicas":2,"updatedReplicas":1,"readyReplicas":1,"availableReplicas":1,
                     "conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded",
                                    "lastUpdateTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z","message":"m"}]}}"#,
        r#"{"kind":"Deployment","metadata":{"name":"batch","namespace":"jobs","uid":"d2",
            "annotations":{"kube-descheduler.io/eviction-guard":"Disabled"}},
           "spec":{"replicas":4,"paused":true,"selector":{},"strategy":{"type":"Recreate"},
                   "template":{"spec":{"containers":[]}}}}"#,
        // Our restart record no longer matches the template: not reported.
        r#"{"kind":"Deployment","metadata":{"name":"api","namespace":"shop","uid":"d3",
            "annotations":{"kube-descheduler.io/restarted-at":"2026-01-01T00:00:00Z"}},
           "spec":{"selector":{},"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-02-02T00:00:00Z"}}}},
           "status":{"replicas":1}}"#,
        r#"{"kind":"Deployment","metadata":{"name":"min"}}"#,
        r#"{"kind":"Deployment","metadata":null,"spec":{"strategy":null,"template":null},
           "status":{"conditions":[{"type":null,"status":"False","reason":"ProgressDeadlineExceeded"}]}}"#,
    ];

    /// The lean decoding must give exactly the facts a full decode gives, field by field.
    #[test]
    fn lean_facts_equal_facts_of_full_objects() {
        for raw in RS {
            assert_eq!(replica_set_facts(raw).unwrap(), full_rs(raw), "{raw}");
        }
        for raw in DEPLOYMENTS {
            assert_eq!(deployment_facts(raw).unwrap(), full_deploy(raw), "{raw}");
        }
        let web = deployment_facts(DEPLOYMENTS[0]).unwrap();
        assert!(web.progress_deadline_exceeded && web.restart.is_some());
        assert_eq!(web.revision, Some(3));
        let batch = deployment_facts(DEPLOYMENTS[1]).unwrap();
        assert!(
            batch.opt_out
                && batch.paused
                && batch.strategy == crate::workload::facts::Strategy::Recreate
        );
        assert_eq!(replica_set_facts(RS[0]).unwrap().revision, Some(7));
    }

    /// The objects of a synthetic cluster decode to the same facts.
    #[test]
    fn lean_facts_equal_full_facts_on_generated_clusters() {
        let text = crate::testing::synthetic_cluster_json(20, 600, 3);
        let list: serde_json::Value = serde_json::from_slice(&text).expect("JSON list");
        let mut seen = (0, 0);
        for item in list["items"].as_array().expect("items") {
            let raw = item.to_string();
            match item["kind"].as_str() {
                Some("ReplicaSet") => {
                    assert_eq!(replica_set_facts(&raw).unwrap(), full_rs(&raw));
                    seen.0 += 1;
                }
                Some("Deployment") => {
                    assert_eq!(deployment_facts(&raw).unwrap(), full_deploy(&raw));
                    seen.1 += 1;
                }
                _ => {}
            }
        }
        assert!(seen.0 > 5 && seen.1 > 5, "{seen:?}");
    }

    /// Wrong types in the fields that are read are errors naming the field.
    #[test]
    fn wrong_types_name_the_field() {
        let e =
            replica_set_facts(r#"{"metadata":{"name":"x"},"spec":{"replicas":"3"}}"#).unwrap_err();
        assert!(e.contains("spec.replicas"), "{e}");
        let e = deployment_facts(
            r#"{"metadata":{"name":"x"},"spec":{"strategy":{"rollingUpdate":{"maxSurge":true}}}}"#,
        )
        .unwrap_err();
        assert!(e.contains("spec.strategy.rollingUpdate.maxSurge"), "{e}");
        let e = deployment_facts(r#"{"metadata":{"ownerReferences":[{"kind":7}]}}"#).unwrap_err();
        assert!(e.contains("metadata.ownerReferences[0].kind"), "{e}");
    }
}
