//! Upstream descheduler, built from the Go module proxy into the cache (as the control plane of
//! `tests/control-plane` is): a Go module made at bench time requires `sigs.k8s.io/descheduler`
//! at [`VERSION`] and repeats the `replace` directives of upstream's own go.mod, and
//! `go build` makes `cmd/descheduler` of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::report::build_go_mod;

/// The upstream release compared with.
pub const VERSION: &str = "v0.36.0";
const MODULE: &str = "sigs.k8s.io/descheduler";

fn cache_root() -> Result<PathBuf, String> {
    std::env::var_os("KD_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kube-descheduler"))
        })
        .ok_or_else(|| "neither KD_CACHE nor HOME is set (the cache directory)".to_string())
}

fn go() -> Result<PathBuf, String> {
    let local = PathBuf::from("/usr/local/go/bin/go");
    if local.exists() {
        return Ok(local);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("go"))
        .find(|g| g.exists())
        .ok_or_else(|| {
            "no Go toolchain (/usr/local/go/bin/go or go on PATH) to build upstream".into()
        })
}

fn go_command(go: &Path, dir: &Path) -> Command {
    let mut c = Command::new(go);
    c.current_dir(dir)
        .env("GOTOOLCHAIN", "auto")
        .env("GOFLAGS", "-buildvcs=false -mod=mod");
    c
}

fn run(mut c: Command, what: &str) -> Result<Vec<u8>, String> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// The cached upstream binary, built first if it is not there.
pub fn binary() -> Result<PathBuf, String> {
    let dir = cache_root()?.join("upstream-descheduler").join(VERSION);
    let bin = dir.join("descheduler");
    if bin.exists() {
        return Ok(bin);
    }
    let go = go()?;
    let module = dir.join("module");
    std::fs::create_dir_all(&module).map_err(|e| format!("{}: {e}", module.display()))?;
    eprintln!(
        "building upstream descheduler {VERSION} into {} (a cold build takes minutes)",
        dir.display()
    );
    // Upstream's go.mod as the module proxy serves it.
    let info = run(
        {
            let mut c = go_command(&go, &module);
            c.args(["mod", "download", "-json", &format!("{MODULE}@{VERSION}")]);
            c
        },
        "go mod download",
    )?;
    let info: serde_json::Value =
        serde_json::from_slice(&info).map_err(|e| format!("go mod download -json: {e}"))?;
    let go_mod_path = info["GoMod"]
        .as_str()
        .ok_or("go mod download -json gave no GoMod path")?;
    let upstream_go_mod =
        std::fs::read_to_string(go_mod_path).map_err(|e| format!("{go_mod_path}: {e}"))?;
    std::fs::write(
        module.join("go.mod"),
        build_go_mod(&upstream_go_mod, MODULE, VERSION),
    )
    .map_err(|e| format!("writing the build module: {e}"))?;
    let tmp = dir.join(format!("descheduler.partial-{}", std::process::id()));
    run(
        {
            let mut c = go_command(&go, &module);
            c.args(["build", "-trimpath", "-o"])
                .arg(&tmp)
                .arg(format!("{MODULE}/cmd/descheduler"));
            c
        },
        "go build",
    )?;
    std::fs::rename(&tmp, &bin).map_err(|e| format!("installing {}: {e}", bin.display()))?;
    Ok(bin)
}
