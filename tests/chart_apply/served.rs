//! kube-sim as the API server for kubectl: the CRDs the chart expects, manifests written for
//! `kubectl apply`, and what the server then serves compared with what was applied.

use super::*;

pub(crate) async fn kubectl(bin: &Path, sim: &SimHandle, args: &[&str]) -> Out {
    kubectl_common::run(bin, Some(sim.kubeconfig_path()), args).await
}

pub(crate) fn group_of(obj: &Value) -> &str {
    obj["apiVersion"]
        .as_str()
        .and_then(|av| av.rsplit_once('/'))
        .map_or("", |(g, _)| g)
}

pub(crate) fn needs_crd(obj: &Value) -> bool {
    CRD_GROUPS.contains(&group_of(obj))
}

/// The CustomResourceDefinitions of the CRD kinds among `objects`: names, scope and one served
/// version with an open schema (kube-sim neither validates nor prunes custom objects).
pub(crate) fn crd_manifests(objects: &[&Value]) -> Vec<Value> {
    // (group, kind, plural, scope, short names, categories) as the operators define them.
    type Known = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    );
    let known: &[Known] = &[
        (
            "monitoring.coreos.com",
            "ServiceMonitor",
            "servicemonitors",
            "Namespaced",
            &["smon"],
            &["prometheus-operator"],
        ),
        (
            "cert-manager.io",
            "Certificate",
            "certificates",
            "Namespaced",
            &["cert", "certs"],
            &["cert-manager"],
        ),
        (
            "cert-manager.io",
            "Issuer",
            "issuers",
            "Namespaced",
            &[],
            &["cert-manager"],
        ),
    ];
    let mut out: Vec<Value> = Vec::new();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or("");
        let group = group_of(o);
        let version = o["apiVersion"]
            .as_str()
            .and_then(|av| av.rsplit_once('/'))
            .map_or("", |(_, v)| v);
        let (g, k, plural, scope, short, categories) = known
            .iter()
            .find(|(g, k, ..)| *g == group && *k == kind)
            .unwrap_or_else(|| panic!("no CRD known for {group} {kind}"));
        let name = format!("{plural}.{g}");
        if out.iter().any(|c| c["metadata"]["name"] == name.as_str()) {
            continue;
        }
        out.push(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": g,
                "scope": scope,
                "names": {"plural": plural, "singular": k.to_lowercase(), "kind": k,
                          "listKind": format!("{k}List"), "shortNames": short, "categories": categories},
                "versions": [{"name": version, "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }));
    }
    out
}

/// Writes objects as a multi-document stream (JSON documents are YAML).
pub(crate) fn write_stream(path: &Path, objects: &[&Value]) {
    let text: Vec<String> = objects.iter().map(|o| o.to_string()).collect();
    std::fs::write(path, text.join("\n---\n")).expect("writing manifests");
}

/// Every field of `want` is in `have` with the same value (the server may add defaults).
pub(crate) fn subset(want: &Value, have: &Value, path: &str, diffs: &mut Vec<String>) {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            for (k, v) in w {
                match h.get(k) {
                    Some(hv) => subset(v, hv, &format!("{path}.{k}"), diffs),
                    None if v.is_null() => {}
                    None => diffs.push(format!("{path}.{k} missing")),
                }
            }
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            for (i, (a, b)) in w.iter().zip(h).enumerate() {
                subset(a, b, &format!("{path}[{i}]"), diffs);
            }
        }
        (a, b) if a == b => {}
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) => diffs.push(format!("{path}: rendered {a}, served {b}")),
    }
}

pub(crate) fn object_ref(o: &Value) -> String {
    format!(
        "{} {}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// `kubectl get -f FILE -o json`: the served objects, in file order.
pub(crate) async fn get_all(
    bin: &Path,
    sim: &SimHandle,
    file: &str,
    ctx: &dyn Fn(&str, &Out) -> String,
) -> Vec<Value> {
    let o = kubectl(bin, sim, &["get", "-f", file, "-o", "json"]).await;
    assert!(o.ok, "{}", ctx("get -f", &o));
    let list: Value = serde_json::from_str(&o.stdout)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e})", ctx("get -f", &o)));
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: not a List", ctx("get -f", &o)))
        .clone()
}
