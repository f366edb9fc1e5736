//! The Go example plugins (examples/wasm-plugins/go/) rebuilt with the Go toolchain go.mod pins:
//! the committed modules are byte-identical to the rebuilt ones, and a Go reactor built without the SDK's WASI rewrite is refused at load with a
//! sentence naming the WASI import (the sandbox offers no WASI).

mod wasm_go_common;

use std::process::Command;

use wasm_go_common::*;

#[test]
fn the_committed_go_modules_are_the_rebuilt_ones() {
    let dir = rebuilt();
    for name in ["podlifetime", "nodetaints"] {
        let rebuilt = std::fs::read(dir.join(format!("{name}.wasm"))).unwrap();
        let committed = std::fs::read(root().join(format!("examples/wasm-plugins/go/{name}.wasm")))
            .unwrap_or_else(|e| panic!("examples/wasm-plugins/go/{name}.wasm: {e}"));
        assert!(
            rebuilt == committed,
            "examples/wasm-plugins/go/{name}.wasm differs from the module built from go/{name}: rebuild it with examples/wasm-plugins/go/build.sh (docs/wasm-plugins.md)"
        );
    }
}

#[test]
fn a_go_reactor_without_the_wasi_rewrite_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.wasm");
    let out = Command::new("go")
        .current_dir(root().join("examples/wasm-plugins/go"))
        .env("PATH", go_path())
        .envs([
            ("GOOS", "wasip1"),
            ("GOARCH", "wasm"),
            ("GOTOOLCHAIN", "local"),
        ])
        .args(["build", "-buildmode=c-shared", "-trimpath", "-o"])
        .arg(&raw)
        .arg("./podlifetime")
        .output()
        .unwrap();
    assert_success(&out);
    let (out, _) = plan(
        dir.path(),
        &policy(
            "GoRaw",
            &format!(
                "{{module: {}, args: {{maxPodLifeTimeSeconds: 60}}}}",
                raw.display()
            ),
            "",
        ),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("args.module") && err.contains("wasi_snapshot_preview1::"),
        "{err}"
    );
    // The same build through the rewrite loads and plans.
    let fixed = dir.path().join("fixed.wasm");
    let st = Command::new("go")
        .current_dir(root().join("sdk/go"))
        .env("PATH", go_path())
        .env("GOTOOLCHAIN", "local")
        .args(["run", "./cmd/kd-wasm-unwasi"])
        .arg(&raw)
        .arg(&fixed)
        .status()
        .unwrap();
    assert!(st.success());
    let (out, v) = plan(
        dir.path(),
        &policy(
            "GoFixed",
            &format!(
                "{{module: {}, timeout: 60s, args: {{maxPodLifeTimeSeconds: 60}}}}",
                fixed.display()
            ),
            "",
        ),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    assert_success(&out);
    assert!(!evictions(&v).is_empty(), "{v}");
}
