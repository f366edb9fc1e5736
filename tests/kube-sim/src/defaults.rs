//! The few API defaults (k8s.io/kubernetes `pkg/apis/*/v1/defaults.go`) that clients and
//! controllers rely on: Deployment strategy, replicas, pod restart/grace settings.
use serde_json::{Value, json};

use crate::resources::ResourceDef;

fn set_if_absent(obj: &mut Value, ptr: &str, v: Value) {
    if obj.pointer(ptr).is_some() {
        return;
    }
    let mut cur = obj;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            map.insert((*p).to_string(), v);
            return;
        }
        cur = map
            .entry((*p).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
        if cur.is_null() {
            *cur = Value::Object(Default::default());
        }
    }
}

/// Pod spec defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`).
fn pod_spec(spec_ptr: &str, obj: &mut Value) {
    if obj.pointer(spec_ptr).is_none() {
        return;
    }
    set_if_absent(obj, &format!("{spec_ptr}/restartPolicy"), json!("Always"));
    set_if_absent(
        obj,
        &format!("{spec_ptr}/terminationGracePeriodSeconds"),
        json!(30),
    );
    set_if_absent(obj, &format!("{spec_ptr}/dnsPolicy"), json!("ClusterFirst"));
    set_if_absent(
        obj,
        &format!("{spec_ptr}/schedulerName"),
        json!("default-scheduler"),
    );
    set_if_absent(obj, &format!("{spec_ptr}/securityContext"), json!({}));
    if let Some(cs) = obj
        .pointer_mut(&format!("{spec_ptr}/containers"))
        .and_then(Value::as_array_mut)
    {
        for c in cs {
            let latest = c
                .get("image")
                .and_then(Value::as_str)
                .is_some_and(|i| !i.contains(':') || i.ends_with(":latest"));
            set_if_absent(
                c,
                "/imagePullPolicy",
                json!(if latest { "Always" } else { "IfNotPresent" }),
            );
            set_if_absent(c, "/terminationMessagePath", json!("/dev/termination-log"));
            set_if_absent(c, "/terminationMessagePolicy", json!("File"));
        }
    }
}

/// Applies defaults in place for the kinds that have ones we model.
pub fn apply(def: &ResourceDef, obj: &mut Value) {
    match (def.group, def.resource) {
        ("", "pods") => {
            pod_spec("/spec", obj);
            set_if_absent(obj, "/status/phase", json!("Pending"));
        }
        ("apps", "deployments") => {
            set_if_absent(obj, "/spec/replicas", json!(1));
            let recreate =
                obj.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate");
            set_if_absent(obj, "/spec/strategy/type", json!("RollingUpdate"));
            if !recreate {
                set_if_absent(obj, "/spec/strategy/rollingUpdate/maxSurge", json!("25%"));
                set_if_absent(
                    obj,
                    "/spec/strategy/rollingUpdate/maxUnavailable",
                    json!("25%"),
                );
            }
            set_if_absent(obj, "/spec/revisionHistoryLimit", json!(10));
            set_if_absent(obj, "/spec/progressDeadlineSeconds", json!(600));
            pod_spec("/spec/template/spec", obj);
        }
        ("apps", "replicasets") => {
            set_if_absent(obj, "/spec/replicas", json!(1));
            pod_spec("/spec/template/spec", obj);
        }
        ("apps", "statefulsets") => {
            set_if_absent(obj, "/spec/replicas", json!(1));
            set_if_absent(obj, "/spec/podManagementPolicy", json!("OrderedReady"));
            set_if_absent(obj, "/spec/updateStrategy/type", json!("RollingUpdate"));
            pod_spec("/spec/template/spec", obj);
        }
        ("apps", "daemonsets") | ("batch", "jobs") => pod_spec("/spec/template/spec", obj),
        ("", "namespaces") => {
            set_if_absent(obj, "/spec/finalizers", json!(["kubernetes"]));
            set_if_absent(obj, "/status/phase", json!("Active"));
            // NamespaceDefaultLabelName (k8s 1.21+): the name label is always set.
            if let Some(name) = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(String::from)
            {
                set_if_absent(obj, "/metadata/labels", json!({}));
                if let Some(l) = obj
                    .pointer_mut("/metadata/labels")
                    .and_then(Value::as_object_mut)
                {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_gvr;

    #[test]
    fn deployment_defaults() {
        let def = by_gvr("apps", "v1", "deployments").unwrap();
        let mut d = json!({"metadata": {"name": "a"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        apply(def, &mut d);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        let mut r = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply(def, &mut r);
        assert!(r["spec"]["strategy"].get("rollingUpdate").is_none());
    }
}
