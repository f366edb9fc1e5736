//! The shipped WebAssembly examples as users run them: the AssemblyScript example rebuilt with
//! `npx asc` (the committed module is the rebuilt one), the examples' policy in `plan` through the
//! binary (rebuilt modules and the committed ones), a failing guest explained in `plan`, and
//! `run --dry-run` against kube-sim with the C and AssemblyScript plugins.

mod run_sim_common;
mod wasm_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
}

/// Builds the AssemblyScript example into `out` with the toolchain `.ci/run` installs
/// (`npm ci` in examples/wasm-plugins/assemblyscript); panics (never skips) without it.
fn build_assemblyscript(out: &Path) -> PathBuf {
    let dir = wasm_common::root().join("examples/wasm-plugins/assemblyscript");
    assert!(
        dir.join("node_modules/.bin/asc").exists(),
        "AssemblyScript is not installed: run `npm ci` in {} (.ci/run does)",
        dir.display()
    );
    let wasm = out.join("oldpods.wasm");
    let status = Command::new("npx")
        .current_dir(&dir)
        .args([
            "--no-install",
            "asc",
            "assembly/index.ts",
            "--optimize",
            "--runtime",
            "stub",
            "--noAssert",
            "--use",
            "abort=",
            "--outFile",
        ])
        .arg(&wasm)
        .status()
        .unwrap_or_else(|e| panic!("cannot run npx ({e}): install nodejs and npm"));
    assert!(status.success(), "asc failed");
    wasm
}

/// A directory laid out like examples/wasm-plugins/ with every module rebuilt from source.
fn rebuilt_examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["podlifetime", "toomanyrestarts"] {
        wasm_common::build_c(name, dir.path());
    }
    let build = dir.path().join("assemblyscript/build");
    std::fs::create_dir_all(&build).unwrap();
    build_assemblyscript(&build);
    std::fs::copy(
        wasm_common::root().join("examples/wasm-plugins/policy.yaml"),
        dir.path().join("policy.yaml"),
    )
    .unwrap();
    dir
}

/// `plan -o json` of `policy` on the bundled example cluster at 2026-01-10.
fn plan(policy: &Path) -> (i32, Value, String) {
    let out = bin()
        .args(["plan", "--policy"])
        .arg(policy)
        .args(["--snapshot", "examples/cluster.yaml"])
        .args(["--now", "2026-01-10T00:00:00Z", "-o", "json"])
        .current_dir(wasm_common::root())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (plugin, pod) of every eviction in a plan.
fn by_plugin(v: &Value) -> Vec<(String, String)> {
    v["evictions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["plugin"].as_str().unwrap_or_default().to_string(),
                        format!(
                            "{}/{}",
                            e["namespace"].as_str().unwrap_or_default(),
                            e["pod"].as_str().unwrap_or_default()
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_committed_assemblyscript_module_is_the_rebuilt_one() {
    let out = tempfile::tempdir().unwrap();
    let rebuilt = std::fs::read(build_assemblyscript(out.path())).unwrap();
    let committed = std::fs::read(
        wasm_common::root().join("examples/wasm-plugins/assemblyscript/build/oldpods.wasm"),
    )
    .unwrap();
    assert!(
        rebuilt == committed,
        "assemblyscript/build/oldpods.wasm differs from the module built from assembly/index.ts: rebuild it (npm run build)"
    );
}

#[test]
fn plan_runs_the_c_and_assemblyscript_plugins() {
    let dir = rebuilt_examples();
    let (code, v, err) = plan(&dir.path().join("policy.yaml"));
    assert_eq!(code, 0, "{err}");
    let evictions = by_plugin(&v);
    for plugin in ["WasmTooManyRestarts", "WasmPodLifeTime", "OldPods"] {
        assert!(
            evictions.iter().any(|(p, _)| p == plugin),
            "{plugin} evicts in plan: {evictions:?}"
        );
    }
    // The same through the committed modules, next to the policy (relative paths).
    let (code, committed, err) =
        plan(&wasm_common::root().join("examples/wasm-plugins/policy.yaml"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(by_plugin(&committed), evictions);
    // The ports decide as the native plugins with the same args (the policy's first profile).
    let native = dir.path().join("native.yaml");
    std::fs::write(
        &native,
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: wasm\n  pluginConfig:\n  - name: RemoveFailedPods\n    args: {minPodLifetimeSeconds: 3600}\n  - name: RemovePodsHavingTooManyRestarts\n    args: {podRestartThreshold: 10, includingInitContainers: true}\n  - name: PodLifeTime\n    args: {maxPodLifeTimeSeconds: 604800, namespaces: {include: [batch]}}\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods, RemovePodsHavingTooManyRestarts, PodLifeTime]\n",
    )
    .unwrap();
    let (code, nv, err) = plan(&native);
    assert_eq!(code, 0, "{err}");
    let rename = |p: &str| match p {
        "RemovePodsHavingTooManyRestarts" => "WasmTooManyRestarts".to_string(),
        "PodLifeTime" => "WasmPodLifeTime".to_string(),
        other => other.to_string(),
    };
    let native_evictions: Vec<(String, String)> = by_plugin(&nv)
        .into_iter()
        .map(|(p, pod)| (rename(&p), pod))
        .collect();
    let without_oldpods: Vec<(String, String)> = evictions
        .into_iter()
        .filter(|(p, _)| p != "OldPods")
        .collect();
    assert_eq!(without_oldpods, native_evictions);
}

#[test]
fn plan_explains_a_failing_guest_and_exits_2_on_a_bad_module() {
    let dir = rebuilt_examples();
    // The restarts plugin replaced by a guest that traps: the others still evict.
    wasm_common::write_wat(
        dir.path(),
        "toomanyrestarts.wasm",
        &wasm_common::guest("", "unreachable", 1),
    );
    let (code, v, err) = plan(&dir.path().join("policy.yaml"));
    assert_eq!(code, 0, "{err}");
    let warnings = v["summary"]["warnings"].to_string();
    assert!(
        warnings.contains("WasmTooManyRestarts failed for this cycle") && warnings.contains("trap"),
        "{warnings}"
    );
    assert!(
        by_plugin(&v)
            .iter()
            .all(|(p, _)| p != "WasmTooManyRestarts")
    );
    for plugin in ["RemoveFailedPods", "WasmPodLifeTime", "OldPods"] {
        assert!(by_plugin(&v).iter().any(|(p, _)| p == plugin), "{plugin}");
    }
    // A module that is not there: a configuration error naming profile, plugin and field.
    std::fs::remove_file(dir.path().join("podlifetime.wasm")).unwrap();
    let (code, _, err) = plan(&dir.path().join("policy.yaml"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("profile \"wasm\"")
            && err.contains("plugin \"WasmPodLifeTime\"")
            && err.contains("args.module"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_dry_run_against_kube_sim_with_wasm_plugins() {
    use run_sim_common::*;
    let modules = rebuilt_examples();
    let old = |mut pod: Value| {
        pod["metadata"]["creationTimestamp"] = json!("2025-01-01T00:00:00Z");
        pod
    };
    let mut objects = vec![replica_set("web", 2), replica_set("api", 1)];
    objects.push(old(rs_pod("web", "web-1", "n2")));
    objects.push(old(rs_pod("web", "web-2", "n3")));
    objects.push(rs_pod("api", "api-1", "n2"));
    let sim = start_sim(cluster(objects)).await;
    let m = modules.path();
    let policy = format!(
        "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: wasm
    pluginConfig:
      - name: CPodLifeTime
        args:
          module: {}
          args: {{maxPodLifeTimeSeconds: 31536000, namespaces: {{include: [shop]}}}}
      - name: OldPods
        args:
          module: {}
          args: {{maxPodLifeTimeSeconds: 86400}}
    plugins:
      deschedule:
        enabled: [CPodLifeTime, OldPods]
",
        m.join("podlifetime.wasm").display(),
        m.join("assemblyscript/build/oldpods.wasm").display(),
    );
    let mut d = start(
        &sim,
        "wasm-dry",
        &policy,
        &["--descheduling-interval=0", "--secure-port=0", "--dry-run"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "log:\n{log}");
    let planned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Evicted pod in dry run mode"))
        .collect();
    // web-1 and web-2 are older than a year: the C port takes them first; the AssemblyScript
    // plugin finds nothing left but api-1, which is younger than a day.
    assert_eq!(planned.len(), 2, "log:\n{log}");
    for name in ["shop/web-1", "shop/web-2"] {
        assert!(
            planned
                .iter()
                .any(|l| l.contains(name) && l.contains("CPodLifeTime")),
            "{name}: {planned:?}"
        );
    }
    for name in ["web-1", "web-2", "api-1"] {
        assert!(!evicted(&sim, name), "dry run evicted {name}");
    }
    sim.shutdown().await;

    // The AssemblyScript plugin alone takes the old pods too.
    let objects = vec![replica_set("web", 1), old(rs_pod("web", "web-1", "n2"))];
    let sim = start_sim(cluster(objects)).await;
    let policy = policy.replace("enabled: [CPodLifeTime, OldPods]", "enabled: [OldPods]");
    let mut d = start(
        &sim,
        "wasm-dry-as",
        &policy,
        &["--descheduling-interval=0", "--secure-port=0", "--dry-run"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "log:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("Evicted pod in dry run mode")
                && l.contains("shop/web-1")
                && l.contains("OldPods")),
        "log:\n{log}"
    );
    sim.shutdown().await;
}
