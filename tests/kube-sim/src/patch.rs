//! PATCH bodies: JSON patch (RFC 6902), merge patch (RFC 7386), strategic merge patch
//! (the subset kubectl sends) and apply patches (treated as a strategic merge).
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// The `Content-Type` of a PATCH request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies a patch body to `current`.
pub fn apply(current: &Value, body: &[u8], kind: PatchType) -> ApiResult<Value> {
    match kind {
        PatchType::Json => {
            let p: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let mut doc = current.clone();
            // kube-apiserver (`handlers/patch.go` jsonPatcher) answers any apply failure,
            // including a failed `test` op, with
            // `errors.NewGenericServerResponse(422, "", GroupResource{}, "", err, 0, false)`:
            // reason Invalid, the generic message, and the patch error itself dropped.
            json_patch::patch(&mut doc, &p).map_err(|_| {
                ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
                .with_details(serde_json::json!({}))
            })?;
            Ok(doc)
        }
        PatchType::Merge => {
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchType::Strategic => {
            let p: Value =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            Ok(strategic_merge(current, &p, ""))
        }
        PatchType::Apply => {
            let text =
                std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let p: Value = serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            Ok(strategic_merge(current, &p, ""))
        }
    }
}

/// Merge key for list fields that use `patchStrategy: merge` in k8s.io/api
/// (matched by field name, which is unambiguous for the kinds we serve).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" => "type",
        "taints" => "key",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Primitive lists merged as sets (`patchStrategy: merge` on `[]string`).
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// A strategic merge (k8s.io/apimachinery `strategicpatch`), limited to what clients send:
/// maps merge recursively, `null` deletes, lists with a known merge key merge by key
/// (`$patch: delete` removes an element), other lists are replaced; `$setElementOrder/…`,
/// `$retainKeys` and `$deleteFromPrimitiveList/…` directives are honoured loosely.
pub fn strategic_merge(current: &Value, patch: &Value, field: &str) -> Value {
    match (current, patch) {
        (Value::Object(cur), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut m = p.clone();
                m.remove("$patch");
                return Value::Object(m);
            }
            let mut out: Map<String, Value> = cur.clone();
            if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
                let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
                out.retain(|k, _| keep.contains(&k.as_str()));
            }
            for (k, v) in p {
                if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
                    continue;
                }
                if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
                    if let (Some(Value::Array(items)), Some(del)) =
                        (out.get_mut(list), v.as_array())
                    {
                        items.retain(|i| !del.contains(i));
                    }
                    continue;
                }
                if v.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match out.get(k) {
                    Some(existing) => strategic_merge(existing, v, k),
                    None => strip_directives(v),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(cur), Value::Array(p)) => {
            if let Some(key) = merge_key(field) {
                let mut out = cur.clone();
                for item in p {
                    let id = item.get(key);
                    let pos = id.and_then(|id| out.iter().position(|o| o.get(key) == Some(id)));
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (pos, delete) {
                        (Some(i), true) => {
                            out.remove(i);
                        }
                        (None, true) => {}
                        (Some(i), false) => out[i] = strategic_merge(&out[i], item, ""),
                        (None, false) => out.push(strip_directives(item)),
                    }
                }
                Value::Array(out)
            } else if is_set_list(field) {
                let mut out = cur.clone();
                for item in p {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                Value::Array(out)
            } else {
                Value::Array(p.iter().map(strip_directives).collect())
            }
        }
        _ => strip_directives(patch),
    }
}

/// Removes `$…` directive keys from a value that is inserted as new.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_test_failure_is_422_invalid() {
        let doc = json!({"metadata": {"labels": {"a": "1"}}});
        let body = br#"[{"op":"test","path":"/metadata/labels/a","value":"2"},{"op":"replace","path":"/metadata/labels/a","value":"3"}]"#;
        let err = apply(&doc, body, PatchType::Json).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(err.reason, "Invalid");
        let ok = br#"[{"op":"test","path":"/metadata/labels/a","value":"1"},{"op":"replace","path":"/metadata/labels/a","value":"3"}]"#;
        assert_eq!(
            apply(&doc, ok, PatchType::Json).unwrap()["metadata"]["labels"]["a"],
            "3"
        );
        assert_eq!(apply(&doc, b"{", PatchType::Json).unwrap_err().code, 400);
    }

    #[test]
    fn strategic_merges_containers_by_name_and_conditions_by_type() {
        let cur = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}});
        let p = json!({"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "spec": {"containers": [{"name": "b", "image": "y:2"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let out = strategic_merge(&cur, &p, "");
        assert_eq!(out["spec"]["containers"][0]["image"], "x:1");
        assert_eq!(out["spec"]["containers"][1]["image"], "y:2");
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        assert_eq!(out["status"]["conditions"].as_array().unwrap().len(), 2);
        let del = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}});
        assert_eq!(
            strategic_merge(&cur, &del, "")["spec"]["containers"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn kubectl_bodies() {
        let node = json!({"spec": {"podCIDR": "10.0.0.0/24"}});
        let out = apply(
            &node,
            br#"{"spec":{"unschedulable":true}}"#,
            PatchType::Strategic,
        )
        .unwrap();
        assert_eq!(out["spec"]["unschedulable"], true);
        assert_eq!(out["spec"]["podCIDR"], "10.0.0.0/24");
        let dep = json!({"spec": {"template": {"metadata": {"labels": {"app": "a"}}}}});
        let restart = br#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}"#;
        let out = apply(&dep, restart, PatchType::Strategic).unwrap();
        assert_eq!(
            out["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(out["spec"]["template"]["metadata"]["labels"]["app"], "a");
        let out = apply(
            &out,
            br#"{"metadata":{"labels":{"x":"y"}},"spec":{"template":null}}"#,
            PatchType::Merge,
        )
        .unwrap();
        assert!(out["spec"].get("template").is_none());
        assert_eq!(out["metadata"]["labels"]["x"], "y");
    }
}
