//! Running Helm (through `tests/chart/render.py`) and the rendered objects.

use super::*;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `render.py batch` on the cases; one result per case.
pub(crate) fn helm_batch(cases: &[Value]) -> Vec<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = root().join("tests/chart/render.py");
    let chart = root().join("charts/kube-descheduler");
    let mut child = Command::new(&python)
        .arg(&script)
        .arg("batch")
        .arg(&chart)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{python}` ({e}): the chart tests need Python 3 with the Helm engine: \
                 pip install {PIN}"
            )
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(cases).expect("cases").as_bytes())
        .expect("writing the cases to render.py");
    let out = child.wait_with_output().expect("waiting for render.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "render.py failed ({}): {stderr}\n(the chart tests need `pip install {PIN}`)",
        out.status
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("render.py printed no JSON ({e}); stderr: {stderr}"));
    assert_eq!(results.len(), cases.len(), "one result per case");
    results
}

pub(crate) fn render_case(values: Value, name: &str, namespace: &str) -> Value {
    json!({"op": "render", "values": values, "name": name, "namespace": namespace})
}

/// A successful render, parsed.
pub(crate) struct Rendered {
    pub(crate) objects: Vec<Value>,
    pub(crate) notes: String,
    pub(crate) release_namespace: String,
}

pub(crate) fn render_ok(values: Value) -> Rendered {
    render_named(values, "kube-descheduler", NS)
}

pub(crate) fn render_named(values: Value, name: &str, namespace: &str) -> Rendered {
    let result = helm_batch(&[render_case(values.clone(), name, namespace)]).remove(0);
    into_rendered(result, &values, namespace)
}

pub(crate) fn into_rendered(result: Value, values: &Value, namespace: &str) -> Rendered {
    assert_eq!(
        result["ok"],
        json!(true),
        "rendering with {values} failed: {}: {}",
        result["error_type"],
        result["error"]
    );
    let mut objects = Vec::new();
    let manifests = result["manifests"].as_object().expect("manifests");
    for (path, text) in manifests {
        let text = text.as_str().expect("manifest text");
        let docs: Vec<Value> = serde_saphyr::from_multiple(text)
            .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}\n{text}"));
        objects.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    Rendered {
        objects,
        notes: result["notes"].as_str().unwrap_or_default().to_owned(),
        release_namespace: namespace.to_owned(),
    }
}

pub(crate) fn render_err(values: Value) -> (String, String) {
    let result = helm_batch(&[render_case(values.clone(), "kube-descheduler", NS)]).remove(0);
    assert_eq!(
        result["ok"],
        json!(false),
        "rendering {values} should have failed"
    );
    (
        result["error_type"].as_str().unwrap_or_default().to_owned(),
        result["error"].as_str().unwrap_or_default().to_owned(),
    )
}

impl Rendered {
    pub(crate) fn kinds(&self) -> BTreeSet<String> {
        self.objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub(crate) fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    pub(crate) fn get(&self, kind: &str, name: &str) -> &Value {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} rendered; have {:?}", self.names()))
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or("?"),
                    o["metadata"]["name"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// (workload, pod spec) of every pod template.
    pub(crate) fn pod_specs(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for o in &self.objects {
            let name = format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            let spec = match o["kind"].as_str() {
                Some("Deployment") | Some("Job") => &o["spec"]["template"]["spec"],
                Some("CronJob") => &o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                _ => continue,
            };
            out.push((name, spec.clone()));
        }
        out
    }

    /// The pod spec whose container has this name (descheduler, webhook, certs).
    pub(crate) fn pod_with_container(&self, container: &str) -> Option<Value> {
        self.pod_specs().into_iter().map(|(_, s)| s).find(|s| {
            s["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["name"] == container)
        })
    }

    pub(crate) fn container(&self, container: &str) -> Value {
        let pod = self.pod_with_container(container).unwrap_or_else(|| {
            panic!(
                "no pod with a `{container}` container; have {:?}",
                self.names()
            )
        });
        pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == container)
            .unwrap()
            .clone()
    }

    pub(crate) fn args(&self, container: &str) -> Vec<String> {
        self.container(container)["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg").to_owned())
            .collect()
    }
}

/// Asserts that `args` set `flag` to `value` (`--flag=value`).
pub(crate) fn assert_flag(args: &[String], flag: &str, value: &str) {
    assert_eq!(
        flag_value(args, flag).as_deref(),
        Some(value),
        "{flag} in {args:?}"
    );
}

/// Asserts every `(flag, value)` of `expected` with [`assert_flag`].
pub(crate) fn assert_flags(args: &[String], expected: &[(&str, &str)]) {
    for (flag, value) in expected {
        assert_flag(args, flag, value);
    }
}

/// The element of the JSON array `list` whose `key` is `value` (`what` names it when missing).
pub(crate) fn element<'a>(list: &'a Value, key: &str, value: &str, what: &str) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .find(|e| e[key] == value)
        .unwrap_or_else(|| panic!("no {what}"))
}

pub(crate) fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}
