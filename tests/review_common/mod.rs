//! The AdmissionReview the API server sends the guard for an eviction, for tests that post one.

use serde_json::{Value, json};

/// The review of a `policy/v1` eviction of pod `namespace/name` by `system:admin` (not a dry
/// run), its Eviction carrying `delete_options` when given.
pub fn eviction_review(namespace: &Value, name: &Value, delete_options: Option<Value>) -> Value {
    let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": name, "namespace": namespace}});
    if let Some(options) = delete_options {
        eviction["deleteOptions"] = options;
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:admin"},
            "object": eviction,
            "dryRun": false
        }
    })
}
