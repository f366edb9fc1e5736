//! Shared by the `wasm_go_*` tests: the Go example plugins rebuilt with the pinned Go toolchain
//! (`examples/wasm-plugins/go/build.sh`, once per test process), `plan -o json` through the
//! binary, the comparison of a port with its native plugin, and the synthetic cluster with
//! creation times (and [`varied`]).
#![allow(dead_code)]

mod varied;
#[allow(unused_imports)]
pub use varied::varied;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The cycle's clock of every test (`plan --now`).
pub const NOW: &str = "2026-01-10T00:00:00Z";

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding `go`: /usr/local/go/bin when present (where .ci/run expects it), else
/// the PATH's. Panics (never skips) without a Go toolchain.
pub fn go_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    let with_local = if Path::new("/usr/local/go/bin/go").exists() {
        format!("/usr/local/go/bin:{path}")
    } else {
        path
    };
    let ok = Command::new("go")
        .arg("version")
        .env("PATH", &with_local)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Go toolchain: install Go (the version examples/wasm-plugins/go/go.mod pins) in /usr/local/go"
    );
    with_local
}

/// Builds the Go packages `pkgs` of examples/wasm-plugins/go into `out` with build.sh.
pub fn build_go(out: &Path, pkgs: &[&str]) {
    let out_abs = out.to_path_buf();
    let res = Command::new("bash")
        .arg(root().join("examples/wasm-plugins/go/build.sh"))
        .arg(&out_abs)
        .args(pkgs)
        .env("PATH", go_path())
        .output()
        .expect("cannot run bash");
    assert!(
        res.status.success(),
        "build.sh {pkgs:?} failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
}

/// A directory with podlifetime.wasm, nodetaints.wasm and misbehave.wasm rebuilt from source
/// (once per test process).
pub fn rebuilt() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("wasm-go-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        build_go(&dir, &["podlifetime", "nodetaints", "misbehave"]);
        dir
    })
}

/// A one-profile policy enabling `plugin` with `args` (YAML flow text) at deschedule, with the
/// policy-wide `extra` lines.
pub fn policy(plugin: &str, args: &str, extra: &str) -> String {
    format!(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n{extra}profiles:\n- name: p\n  pluginConfig:\n  - name: {plugin}\n    args: {args}\n  plugins:\n    deschedule:\n      enabled: [{plugin}]\n"
    )
}

/// `plan -o json` of `policy` (written to `dir`) on `snapshot` at [`NOW`], with `extra` args.
pub fn plan(dir: &Path, policy: &str, snapshot: &Path, extra: &[&str]) -> (Output, Value) {
    let file = dir.join(format!("policy-{}.yaml", unique()));
    std::fs::write(&file, policy).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "--policy"])
        .arg(&file)
        .arg("--snapshot")
        .arg(snapshot)
        .args(["--now", NOW, "-o", "json"])
        .args(extra)
        .current_dir(root())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The evictions of a plan, each without its plugin name (which differs between a native
/// plugin and its port), in order.
pub fn evictions(v: &Value) -> Vec<Value> {
    v["evictions"]
        .as_array()
        .unwrap_or_else(|| panic!("no evictions in {v}"))
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if let Some(o) = e.as_object_mut() {
                o.remove("plugin");
            }
            e
        })
        .collect()
}

/// The synthetic cluster (`kube_descheduler::synth`) as JSON with a creation time on every pod,
/// ages spread over 40 days before [`NOW`], written to `dir`; returns its path.
pub fn synthetic(dir: &Path, nodes: usize, pods: usize, seed: u64) -> PathBuf {
    let json = kube_descheduler::testing::synthetic_cluster_json(nodes, pods, seed);
    let out = kube_descheduler::synth::with_creation_times(&json, NOW.parse().unwrap());
    let path = dir.join(format!("synthetic-{nodes}-{pods}-{seed}.json"));
    std::fs::write(&path, out).unwrap();
    path
}

/// Plans `native` and the Go port `module` with the same `args` on `snapshot` (policy-wide `extra`
/// lines); asserts identical evictions (plugin names aside: same pods, order, outcomes and
/// reasons) and no plugin failure; returns them.
pub fn assert_same(
    dir: &Path,
    native: &str,
    module: &str,
    args: &str,
    snapshot: &Path,
    extra: &str,
) -> Vec<Value> {
    let run = |p: String| {
        let (out, v) = plan(dir, &p, snapshot, &[]);
        assert_success(&out);
        let warnings = v["summary"]["warnings"].to_string();
        assert!(
            !warnings.contains("failed for this cycle"),
            "{args}: {warnings}"
        );
        evictions(&v)
    };
    let want = run(policy(native, args, extra));
    let got = run(policy(
        "GoPort",
        &format!(
            "{{module: {}, timeout: 60s, args: {args}}}",
            rebuilt().join(module).display()
        ),
        extra,
    ));
    assert_eq!(got.len(), want.len(), "{native} {args}: counts differ");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{native} {args}");
    }
    want
}

/// How many of `evictions` have outcome `outcome` (`evicted`, `denied`, …).
pub fn count(evictions: &[Value], outcome: &str) -> usize {
    evictions.iter().filter(|e| e["outcome"] == outcome).count()
}

/// Asserts that the command in `out` succeeded, showing its stderr if not.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
