//! kubectl and Helm on the shared cluster: JSON reads, server-side apply, the rendered chart, the
//! kubectl binaries to drain with.

use super::*;

pub(crate) fn kubectl_json(c: &Cluster, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = c.kubectl(&a);
    assert!(out.ok, "kubectl {args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("kubectl printed JSON")
}

pub(crate) fn kubectl_ok(c: &Cluster, args: &[&str]) -> Out {
    let out = c.kubectl(args);
    assert!(out.ok, "kubectl {args:?}: {}{}", out.stdout, out.stderr);
    out
}

/// `kubectl apply --server-side` (field validation Strict, kubectl's default) of `objects`.
pub(crate) fn apply_server_side(c: &Cluster, objects: &[Value]) -> Out {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = run_bounded_stdin(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args([
                "apply",
                "--server-side",
                "--field-manager=helm",
                "--validate=strict",
                "-f",
                "-",
            ]),
        &list.to_string(),
        Duration::from_secs(120),
    );
    assert!(out.ok, "kubectl apply --server-side: {}", out.stderr);
    out
}

/// The chart rendered by the real Helm engine for `values`: its objects in template order.
pub(crate) fn render_chart(values: &Value) -> Vec<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let out = run_bounded(
        Command::new(&python)
            .arg(root().join("tests/chart/render.py"))
            .arg("render")
            .arg(root().join("charts/kube-descheduler"))
            .arg("--values-json")
            .arg(values.to_string()),
        Duration::from_secs(120),
    );
    assert!(
        out.ok,
        "render.py failed (pip install helm-python-sdk==0.2.2): {}",
        out.stderr
    );
    let json = run_bounded_stdin(
        Command::new(&python).args([
            "-c",
            "import sys, json, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ]),
        &out.stdout,
        Duration::from_secs(60),
    );
    assert!(json.ok, "YAML to JSON (needs PyYAML): {}", json.stderr);
    serde_json::from_str(&json.stdout).expect("rendered objects")
}

pub(crate) fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the chart renders no {kind} {name}"))
}

/// kubectl 1.33 (next to the kubectl on PATH) and the kubectl on PATH.
pub(crate) fn kubectls() -> Vec<(String, PathBuf)> {
    let on_path = PathBuf::from("kubectl");
    let mut bins = Vec::new();
    let which = run_bounded(
        Command::new("sh").args(["-c", "readlink -f \"$(command -v kubectl)\""]),
        Duration::from_secs(10),
    );
    let v133 = Path::new(which.stdout.trim())
        .parent()
        .map(|d| d.join("kubectl.1.33"));
    match v133 {
        Some(p) if p.exists() => bins.push(("1.33".to_owned(), p)),
        _ => eprintln!("kubectl.1.33 not found next to kubectl: only the one on PATH"),
    }
    bins.push(("path".to_owned(), on_path));
    bins
}
