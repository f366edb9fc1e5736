//! Docs that cannot rot: every fenced shell block in the repository's Markdown files
//! (README.md, docs/, charts/, certs/, webhook-config/, tests/kube-sim/, …) is tagged
//! `sh runnable` or `sh illustrative`, and every `runnable` block runs with bash against the
//! built binaries and exits 0 — so a renamed flag or subcommand in a documented command fails
//! `cargo test --workspace`. The convention: docs/development.md, "Shell examples".
//!
//! `harness = false`: the test binary doubles as `kube-sim`. The runnable blocks find a
//! `kube-sim` on PATH that is a symlink to this binary; started under that name it runs
//! kube-sim's own command line (`kube_sim::cli`), so no second build of the stand-in is needed.
//! Cases run in order; arguments that do not start with `-` filter them by substring, as with
//! libtest.
mod docs_common;

use docs_common::{Block, Kind, Runner};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Time a documented block may take (kube-sim's start and a few commands need a few seconds).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(45);

/// A case of this test: `Ok` or what went wrong.
type Case = fn() -> Result<(), String>;

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if Path::new(&argv0)
        .file_name()
        .is_some_and(|n| n == "kube-sim")
    {
        return kube_sim::cli::main_with_args(std::env::args_os());
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let list_only = std::env::args().any(|a| a == "--list");
    let selected: Vec<_> = CASES
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if list_only {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", selected.len());
    let failed = run_cases(&selected);
    println!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// The cases of this test, by name.
const CASES: &[(&str, Case)] = &[
    (
        "parse_finds_blocks_lines_and_tags",
        parse_finds_blocks_lines_and_tags,
    ),
    (
        "untagged_shell_block_is_reported",
        untagged_shell_block_is_reported,
    ),
    ("unclosed_fence_is_an_error", unclosed_fence_is_an_error),
    (
        "documented_command_with_renamed_flag_fails",
        documented_command_with_renamed_flag_fails,
    ),
    (
        "cargo_run_maps_to_built_binaries",
        cargo_run_maps_to_built_binaries,
    ),
    ("cargo_other_than_run_fails", cargo_other_than_run_fails),
    (
        "strict_mode_stops_at_first_failure",
        strict_mode_stops_at_first_failure,
    ),
    (
        "background_processes_are_killed",
        background_processes_are_killed,
    ),
    ("timeout_fails_the_block", timeout_fails_the_block),
    ("writes_stay_in_the_copy", writes_stay_in_the_copy),
    ("links_outside_code_are_found", links_outside_code_are_found),
    ("every_shell_block_is_tagged", every_shell_block_is_tagged),
    ("every_relative_link_resolves", every_relative_link_resolves),
    ("every_runnable_block_runs", every_runnable_block_runs),
];

/// Runs `cases` one after the other (a panic fails its case), printing each result; returns
/// the names of those that failed.
fn run_cases(cases: &[&(&'static str, Case)]) -> Vec<&'static str> {
    let mut failed = Vec::new();
    for (name, case) in cases {
        let start = Instant::now();
        let result = std::panic::catch_unwind(case)
            .unwrap_or_else(|_| Err("panicked (see above)".to_string()));
        match result {
            Ok(()) => println!(
                "test {name} ... ok ({:.1} s)",
                start.elapsed().as_secs_f64()
            ),
            Err(msg) => {
                println!("test {name} ... FAILED\n{msg}");
                failed.push(*name);
            }
        }
    }
    failed
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory with `kube-descheduler` (the built binary) and `kube-sim` (this binary, which
/// acts as kube-sim under that name), kept for the life of the process.
fn bin_dir() -> Result<&'static Path, String> {
    use std::sync::OnceLock;
    static DIR: OnceLock<Result<tempfile::TempDir, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().map_err(|e| format!("bin dir: {e}"))?;
        let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let links = [
            (
                PathBuf::from(env!("CARGO_BIN_EXE_kube-descheduler")),
                "kube-descheduler",
            ),
            (me, "kube-sim"),
        ];
        for (target, name) in links {
            std::os::unix::fs::symlink(&target, dir.path().join(name))
                .map_err(|e| format!("symlink {name} -> {}: {e}", target.display()))?;
        }
        Ok(dir)
    });
    match dir {
        Ok(d) => Ok(d.path()),
        Err(e) => Err(e.clone()),
    }
}

fn runner(timeout: Duration) -> Result<Runner, String> {
    Ok(Runner {
        bin_dir: bin_dir()?.to_path_buf(),
        repo: repo_root(),
        timeout,
    })
}

/// Runs `body` as a runnable block would run; `Ok(output)` when it exits 0.
fn run_ok(body: &str) -> Result<String, String> {
    let out = runner(BLOCK_TIMEOUT)?.run(body);
    if out.ok {
        Ok(out.output)
    } else {
        Err(format!("{}: {}\n{}", out.status, body, out.output))
    }
}

/// Runs `body` and expects it to fail; `Ok(output)` when it did.
fn run_failing(body: &str, timeout: Duration) -> Result<(String, String), String> {
    let out = runner(timeout)?.run(body);
    if out.ok {
        Err(format!(
            "expected a failure, but it exited 0: {body}\n{}",
            out.output
        ))
    } else {
        Ok((out.status, out.output))
    }
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

// ---- the harness itself ----

fn parse_finds_blocks_lines_and_tags() -> Result<(), String> {
    let md = "# t\n\n```sh runnable\nkube-descheduler plan\n```\n\ntext\n\n  ~~~bash illustrative\n  \
              helm install x\n  ```\n  ~~~\n\n````text\n```sh\n````\n```json\n{}\n```\n";
    let blocks = docs_common::parse_blocks(Path::new("x.md"), md)?;
    let got: Vec<(usize, &str, Kind)> = blocks
        .iter()
        .map(|b| (b.line, b.info.as_str(), b.kind()))
        .collect();
    let want = vec![
        (3, "sh runnable", Kind::Runnable),
        (9, "bash illustrative", Kind::Illustrative),
        (14, "text", Kind::Other),
        (17, "json", Kind::Other),
    ];
    ensure(got == want, || format!("blocks: {got:?}, want {want:?}"))?;
    ensure(blocks[0].body == "kube-descheduler plan\n", || {
        format!("{:?}", blocks[0].body)
    })?;
    // The fence's indentation is removed; a shorter fence of the other kind is content.
    ensure(blocks[1].body == "helm install x\n```\n", || {
        format!("{:?}", blocks[1].body)
    })?;
    ensure(blocks[2].body == "```sh\n", || {
        format!("{:?}", blocks[2].body)
    })
}

fn untagged_shell_block_is_reported() -> Result<(), String> {
    let md = "a\n```sh\nls\n```\n```console\n$ ls\n```\n```sh runnable\ntrue\n```\n\
              ```bash runable\ntrue\n```\n";
    let blocks = docs_common::parse_blocks(Path::new("docs/x.md"), md)?;
    let errors = docs_common::convention_errors(&blocks);
    ensure(errors.len() == 3, || format!("errors: {errors:#?}"))?;
    ensure(
        errors[0].starts_with("docs/x.md:2: shell block fenced ```sh "),
        || errors[0].clone(),
    )?;
    ensure(errors[1].starts_with("docs/x.md:5: "), || errors[1].clone())?;
    // A misspelt tag is not a tag.
    ensure(
        errors[2].starts_with("docs/x.md:11: shell block fenced ```bash runable"),
        || errors[2].clone(),
    )
}

fn unclosed_fence_is_an_error() -> Result<(), String> {
    match docs_common::parse_blocks(Path::new("y.md"), "x\n```sh runnable\ntrue\n") {
        Err(e) => ensure(e == "y.md:2: code fence never closed", || e.clone()),
        Ok(b) => Err(format!("accepted an unclosed fence: {b:?}")),
    }
}

fn documented_command_with_renamed_flag_fails() -> Result<(), String> {
    // The same command passes with the real flag and fails with a renamed one: this is what
    // makes a renamed flag in the CLI fail the documented examples.
    run_ok("kube-descheduler plan --now 2026-01-10T00:00:00Z >/dev/null")?;
    let (status, output) = run_failing(
        "kube-descheduler plan --now-time 2026-01-10T00:00:00Z",
        BLOCK_TIMEOUT,
    )?;
    ensure(status == "exit status 2", || format!("{status}\n{output}"))?;
    ensure(output.contains("--now-time"), || {
        format!("output does not name the flag:\n{output}")
    })?;
    // A flag of kube-sim too.
    run_failing(
        "kube-sim --snapshot examples/cluster.yaml --kubeconfig-outt k",
        BLOCK_TIMEOUT,
    )
    .map(|_| ())
}

fn cargo_run_maps_to_built_binaries() -> Result<(), String> {
    let out = run_ok(
        "cargo run --release -- plan --now 2026-01-10T00:00:00Z -o json > plan.json\n\
         head -c 40 plan.json; echo\n\
         cargo run -- --version\n\
         cargo run -q -p kube-sim -- --help | head -1\n\
         cargo run --bin kube-sim -- --help >/dev/null",
    )?;
    ensure(
        out.starts_with("{") && out.contains("\"contractVersion\""),
        || out.clone(),
    )?;
    ensure(out.contains("kube-descheduler "), || out.clone())?;
    ensure(out.contains("In-process Kubernetes API stand-in"), || {
        out.clone()
    })
}

fn cargo_other_than_run_fails() -> Result<(), String> {
    for body in [
        "cargo test --workspace",
        "cargo run -p other -- x",
        "cargo run --features x -- plan",
    ] {
        let (status, output) = run_failing(body, BLOCK_TIMEOUT)?;
        ensure(status == "exit status 97", || {
            format!("{body}: {status}\n{output}")
        })?;
        ensure(output.contains("docs harness:"), || {
            format!("{body}: {output}")
        })?;
    }
    Ok(())
}

fn strict_mode_stops_at_first_failure() -> Result<(), String> {
    let (_, output) = run_failing("false | cat\necho reached", BLOCK_TIMEOUT)?;
    ensure(!output.contains("reached"), || {
        format!("pipefail not set: {output}")
    })?;
    let (_, output) = run_failing("echo $UNSET_VARIABLE_XYZ\necho reached", BLOCK_TIMEOUT)?;
    ensure(!output.contains("reached"), || {
        format!("nounset not set: {output}")
    })
}

fn background_processes_are_killed() -> Result<(), String> {
    let pid_file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let path = pid_file.path().display().to_string();
    run_ok(&format!("sleep 300 &\necho $! > '{path}'\n(sleep 301 &)"))?;
    let pid = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let pid = pid.trim();
    ensure(!pid.is_empty(), || "no pid written".into())?;
    // The process is gone (not even a zombie of ours: it was re-parented and reaped).
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("background process {pid} still runs"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn timeout_fails_the_block() -> Result<(), String> {
    let start = Instant::now();
    let (status, _) = run_failing("echo started\nsleep 60", Duration::from_secs(1))?;
    ensure(status == "timed out after 1 s", || status.clone())?;
    ensure(start.elapsed() < Duration::from_secs(10), || {
        format!("took {:?}", start.elapsed())
    })
}

fn writes_stay_in_the_copy() -> Result<(), String> {
    let marker = "docs-harness-marker.txt";
    run_ok(&format!(
        "echo x > {marker}\nrm examples/policy.yaml\ntest -d \"$TMPDIR\""
    ))?;
    ensure(!repo_root().join(marker).exists(), || {
        "a block wrote into the repository".into()
    })?;
    ensure(repo_root().join("examples/policy.yaml").exists(), || {
        "a block removed a file of the repository".into()
    })
}

fn links_outside_code_are_found() -> Result<(), String> {
    let md = "See [a](docs/a.md#x) and [web](https://x.y/z) and [top](#top).\n\
              `[no](code.md)` ![img](p.png \"title\")\n```text\n[no](fenced.md)\n```\n[b](../b.md)\n";
    let got: Vec<(usize, String, Option<String>)> = docs_common::relative_links(md)
        .into_iter()
        .map(|l| (l.line, l.path, l.fragment))
        .collect();
    let link = |line: usize, path: &str, fragment: Option<&str>| {
        (line, path.to_string(), fragment.map(str::to_string))
    };
    let want = vec![
        link(1, "docs/a.md", Some("x")),
        link(1, "", Some("top")),
        link(2, "p.png", None),
        link(6, "../b.md", None),
    ];
    ensure(got == want, || format!("links: {got:?}, want {want:?}"))?;
    let anchors = docs_common::heading_anchors(
        "# `plan` at 5,000 / 150,000\n```\n# no\n```\n## Where — and why?\n#nope\n",
    );
    ensure(
        anchors == ["plan-at-5000--150000", "where--and-why"],
        || format!("{anchors:?}"),
    )?;
    // A missing file or heading is reported with its file and line.
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let write =
        |p: &str, text: &str| std::fs::write(dir.path().join(p), text).map_err(|e| e.to_string());
    std::fs::create_dir(dir.path().join("docs")).map_err(|e| e.to_string())?;
    write(
        "docs/x.md",
        "# X\n[ok](y.md#why) [gone](z.md)\n[bad](y.md#how) [self](#x) [me](#y)\n",
    )?;
    write("docs/y.md", "## Why\n[up](../docs/x.md)\n")?;
    let errors = docs_common::broken_links(dir.path())?;
    let want = [
        "docs/x.md:2: link to `z.md`: no such file",
        "docs/x.md:3: link to `y.md#how`: no such heading",
        "docs/x.md:3: link to `#y`: no such heading",
    ];
    ensure(errors == want, || format!("{errors:#?}"))
}

// ---- the repository's documentation ----

fn repo_blocks() -> Result<Vec<Block>, String> {
    docs_common::all_blocks(&repo_root())
}

fn every_shell_block_is_tagged() -> Result<(), String> {
    let blocks = repo_blocks()?;
    let files = docs_common::markdown_files(&repo_root());
    ensure(files.iter().any(|f| f == Path::new("README.md")), || {
        "README.md not scanned".into()
    })?;
    let errors = docs_common::convention_errors(&blocks);
    ensure(errors.is_empty(), || errors.join("\n"))
}

fn every_relative_link_resolves() -> Result<(), String> {
    let errors = docs_common::broken_links(&repo_root())?;
    ensure(errors.is_empty(), || errors.join("\n"))
}

fn every_runnable_block_runs() -> Result<(), String> {
    let blocks: Vec<Block> = repo_blocks()?
        .into_iter()
        .filter(|b| b.kind() == Kind::Runnable)
        .collect();
    ensure(!blocks.is_empty(), || "no runnable blocks found".into())?;
    // The README's quick start must be among them.
    ensure(
        blocks.iter().any(|b| {
            b.file == Path::new("README.md") && b.body.contains("cargo run --release -- plan")
        }),
        || "the README's quick-start `plan` is not a runnable block".into(),
    )?;
    let runner = runner(BLOCK_TIMEOUT)?;
    // Two at a time, from one queue: most blocks wait on kube-sim or the disk, and the machine
    // has few cores.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes: Vec<std::sync::Mutex<Option<docs_common::Outcome>>> =
        blocks.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(block) = blocks.get(i) else { break };
                    let outcome = runner.run(&block.body);
                    if let Ok(mut slot) = outcomes[i].lock() {
                        *slot = Some(outcome);
                    }
                }
            });
        }
    });
    let mut results = Vec::new();
    for (block, slot) in blocks.iter().zip(outcomes) {
        match slot.into_inner().ok().flatten() {
            Some(outcome) => results.push((block, outcome)),
            None => {
                return Err(format!(
                    "{}: the runner thread did not finish it",
                    block.place()
                ));
            }
        }
    }
    let mut failures = String::new();
    for (block, outcome) in &results {
        println!(
            "  {} ... {} ({:.1} s)",
            block.place(),
            outcome.status,
            outcome.elapsed.as_secs_f64()
        );
        if !outcome.ok {
            failures.push_str(&docs_common::report(block, outcome));
        }
    }
    ensure(failures.is_empty(), || failures)
}
