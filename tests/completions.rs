//! `kube-descheduler completions bash|zsh|fish`: the bash script completes subcommands and flags
//! in a real bash (its completion function driven with COMP_WORDS/COMP_CWORD as bash's
//! programmable completion calls it); the zsh and fish scripts are valid for those shells.

mod cli_common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn script(shell: &str, dir: &Path) -> PathBuf {
    let out = cli_common::succeeds(cli_common::bin().args(["completions", shell]));
    assert!(!out.stdout.is_empty(), "{shell}: a script");
    let path = dir.join(format!("kube-descheduler.{shell}"));
    std::fs::write(&path, &out.stdout).expect("written");
    path
}

/// The candidates bash's completion of `words` (the last one being completed) offers.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n_kube__descheduler kube-descheduler '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    let out =
        cli_common::succeeds(Command::new("bash").args(["--norc", "--noprofile", "-c", &program]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_subcommands_and_flags_of_plan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bash = script("bash", dir.path());
    assert_eq!(bash_complete(&bash, &["kube-descheduler", "pl"]), ["plan"]);
    let run_or_more = bash_complete(&bash, &["kube-descheduler", ""]);
    for sub in ["plan", "run", "webhook", "certs", "completions"] {
        assert!(
            run_or_more.iter().any(|c| c == sub),
            "{sub}: {run_or_more:?}"
        );
    }
    let flags = bash_complete(&bash, &["kube-descheduler", "plan", "--kube"]);
    assert_eq!(flags, ["--kubeconfig"]);
    let flags = bash_complete(&bash, &["kube-descheduler", "plan", "--expl"]);
    assert!(
        flags.iter().any(|f| f == "--explain") && flags.iter().any(|f| f == "--explain-node"),
        "{flags:?}"
    );
    // Values of a closed set are completed too.
    assert_eq!(
        bash_complete(&bash, &["kube-descheduler", "completions", "fi"]),
        ["fish"]
    );
}

/// `shell` on PATH, or None with a loud message (CI installs both: .ci/run).
fn shell(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "SKIPPED: `{name}` is not installed, its completion script is NOT checked (apt-get install {name}; CI installs it)"
        );
    }
    found
}

#[test]
fn zsh_and_fish_scripts_parse_in_their_shells() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, check) in [("zsh", "-n"), ("fish", "--no-execute")] {
        let file = script(name, dir.path());
        let text = std::fs::read_to_string(&file).expect("read back");
        assert!(
            text.contains("kube-descheduler") && text.contains("kubeconfig"),
            "{name}"
        );
        let Some(sh) = shell(name) else { continue };
        cli_common::succeeds(Command::new(sh).arg(check).arg(&file));
    }
    // A broken script is refused by the same check (the check is not a no-op).
    let broken = dir.path().join("broken.zsh");
    std::fs::write(&broken, "_f() {\n  if [[ -n x ]]; then\n}\n").expect("written");
    if let Some(zsh) = shell("zsh") {
        let out = Command::new(zsh)
            .arg("-n")
            .arg(&broken)
            .output()
            .expect("zsh runs");
        assert!(!out.status.success(), "zsh -n refuses a broken script");
    }
}
