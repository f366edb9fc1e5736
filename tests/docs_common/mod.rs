//! The doc-command harness used by `tests/docs_commands.rs`: finds the fenced code blocks of the
//! repository's Markdown files, checks the shell-block convention (`sh runnable` or
//! `sh illustrative`, never an untagged `sh`), and runs `runnable` blocks with bash against the
//! built binaries. The convention is documented in docs/development.md ("Shell examples").
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Info-string words that make a block a shell block (the first word of the info string).
pub const SHELL_LANGS: &[&str] = &["sh", "bash", "shell", "console", "zsh"];

/// One fenced code block.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The Markdown file, relative to the repository root.
    pub file: PathBuf,
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The info string after the fence (trimmed), e.g. `sh runnable`.
    pub info: String,
    /// The block's lines, without the fences (indentation of the fence removed).
    pub body: String,
}

/// What the convention says a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Not a shell block (text, json, yaml, …): not checked.
    Other,
    /// `sh runnable`: run by the test.
    Runnable,
    /// `sh illustrative`: shown only.
    Illustrative,
    /// A shell block without one of the two tags: a test failure.
    Untagged,
}

impl Block {
    /// Classifies the block by its info string.
    pub fn kind(&self) -> Kind {
        let mut words = self.info.split_whitespace();
        let lang = words.next().unwrap_or("");
        // `{.sh}` / `sh,runnable` style info strings are not used here; the first word decides.
        if !SHELL_LANGS.contains(&lang) {
            return Kind::Other;
        }
        match words.next() {
            Some("runnable") => Kind::Runnable,
            Some("illustrative") => Kind::Illustrative,
            _ => Kind::Untagged,
        }
    }

    /// `file:line` for messages.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// A fence being read: opening line, fence character and length, indentation, info string,
/// lines so far.
struct OpenFence<'a> {
    start: usize,
    ch: char,
    len: usize,
    indent: usize,
    info: String,
    lines: Vec<&'a str>,
}

/// Parses the fenced code blocks (backticks or tildes, three or more, any indentation) of one
/// Markdown text. An unclosed fence is an error (CommonMark would run it to the end of the file,
/// which hides every later block).
pub fn parse_blocks(file: &Path, text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut open: Option<OpenFence> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence_char.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match open.take() {
            None => {
                if let Some(ch) = fence_char.filter(|_| run >= 3) {
                    open = Some(OpenFence {
                        start: i + 1,
                        ch,
                        len: run,
                        indent,
                        info: trimmed[run..].trim().to_string(),
                        lines: Vec::new(),
                    });
                }
            }
            Some(mut f) => {
                let closes =
                    fence_char == Some(f.ch) && run >= f.len && trimmed[run..].trim().is_empty();
                if closes {
                    let body: Vec<&str> = f
                        .lines
                        .iter()
                        .map(|l| {
                            let strip = (l.len() - l.trim_start().len()).min(f.indent);
                            &l[strip..]
                        })
                        .collect();
                    blocks.push(Block {
                        file: file.to_path_buf(),
                        line: f.start,
                        info: f.info,
                        body: body.join("\n") + "\n",
                    });
                } else {
                    f.lines.push(line);
                    open = Some(f);
                }
            }
        }
    }
    match open {
        Some(f) => Err(format!(
            "{}:{}: code fence never closed",
            file.display(),
            f.start
        )),
        None => Ok(blocks),
    }
}

/// The Markdown files the convention covers: every `*.md` under `root`, skipping `target/` and
/// hidden directories, in sorted order, relative to `root`.
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let path = e.path();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Some(rel) = name
                .ends_with(".md")
                .then(|| path.strip_prefix(root).ok())
                .flatten()
            {
                out.push(rel.to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Every block of every Markdown file under `root`.
pub fn all_blocks(root: &Path) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    for rel in markdown_files(root) {
        let text = fs::read_to_string(root.join(&rel))
            .map_err(|e| format!("{}: cannot read: {e}", rel.display()))?;
        blocks.extend(parse_blocks(&rel, &text)?);
    }
    Ok(blocks)
}

/// One line per shell block that breaks the convention.
pub fn convention_errors(blocks: &[Block]) -> Vec<String> {
    blocks
        .iter()
        .filter(|b| b.kind() == Kind::Untagged)
        .map(|b| {
            format!(
                "{}: shell block fenced ```{} must be tagged `runnable` or `illustrative` \
                 (e.g. ```sh runnable)",
                b.place(),
                b.info
            )
        })
        .collect()
}

/// What the bash script of a runnable block starts with: strict mode, and `cargo` as a function
/// that maps `cargo run [--release] [-p kube-sim | --bin NAME] [-q] [--locked] -- ARGS` to the
/// built binary on PATH and refuses anything else (`cargo test` would recurse; builds belong to
/// the test's own build).
pub const PREAMBLE: &str = r#"set -euo pipefail
cargo() {
  if [ "${1:-}" != run ]; then
    echo "docs harness: only 'cargo run [--release] [-p kube-sim] -- ARGS' may appear in a runnable block, not: cargo $*" >&2
    return 97
  fi
  shift
  local bin=kube-descheduler
  while [ $# -gt 0 ]; do
    case "$1" in
      --) shift; break ;;
      --release|-q|--quiet|--locked|--offline|--frozen) shift ;;
      -p|--package|--bin)
        if [ $# -lt 2 ]; then echo "docs harness: $1 needs a value" >&2; return 97; fi
        bin="$2"; shift 2 ;;
      --package=*|--bin=*) bin="${1#*=}"; shift ;;
      *) echo "docs harness: unsupported cargo run option: $1" >&2; return 97 ;;
    esac
  done
  case "$bin" in
    kube-descheduler|kube-sim) command "$bin" "$@" ;;
    *) echo "docs harness: no binary '$bin' (kube-descheduler, kube-sim)" >&2; return 97 ;;
  esac
}
"#;

/// Where and how runnable blocks run.
pub struct Runner {
    /// A directory holding `kube-descheduler` and `kube-sim`, put first on PATH.
    pub bin_dir: PathBuf,
    /// The repository whose files a block sees (copied per block, so writes stay in the copy).
    pub repo: PathBuf,
    /// How long a block may take.
    pub timeout: Duration,
}

/// The result of running one block.
#[derive(Debug)]
pub struct Outcome {
    /// Whether bash exited 0 within the timeout.
    pub ok: bool,
    /// `exit status N`, `timed out after Ns`, or a harness error.
    pub status: String,
    /// Stdout and stderr, interleaved as written.
    pub output: String,
    /// Wall time.
    pub elapsed: Duration,
}

impl Runner {
    /// Runs one block's body with bash in a fresh copy of the repository, PATH starting with
    /// `bin_dir`, `TMPDIR` and `HOME` inside a scratch directory and `KUBECONFIG` unset. Every
    /// process the block leaves behind (e.g. `kube-sim … &`) is killed with its process group.
    pub fn run(&self, body: &str) -> Outcome {
        let start = Instant::now();
        let fail = |status: String| Outcome {
            ok: false,
            status,
            output: String::new(),
            elapsed: start.elapsed(),
        };
        let scratch = match self.prepare_scratch() {
            Ok(s) => s,
            Err(status) => return fail(status),
        };
        let mut cmd = match self.block_command(body, &scratch) {
            Ok(c) => c,
            Err(status) => return fail(status),
        };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return fail(format!("harness: cannot start bash: {e}")),
        };
        let pgid = child.id();
        let status = wait_until(&mut child, start, self.timeout);
        kill_group(pgid);
        // Reap bash if it was the one that timed out.
        let _ = child.wait();
        let output = read_lossy(&scratch.log_path);
        let elapsed = start.elapsed();
        match status {
            Ok(s) if s.success() => Outcome {
                ok: true,
                status: "exit status 0".into(),
                output,
                elapsed,
            },
            Ok(s) => Outcome {
                ok: false,
                status: match s.code() {
                    Some(c) => format!("exit status {c}"),
                    None => "killed by a signal".into(),
                },
                output,
                elapsed,
            },
            Err(why) => Outcome {
                ok: false,
                status: format!("{why} after {} s", self.timeout.as_secs()),
                output,
                elapsed,
            },
        }
    }

    /// A scratch directory holding a copy of the repository, empty `tmp` and `home`
    /// directories, and the path of the block's output file; the error is the harness status.
    fn prepare_scratch(&self) -> Result<Scratch, String> {
        let dir = tempfile::tempdir()
            .map_err(|e| format!("harness: cannot create a scratch dir: {e}"))?;
        let work = dir.path().join("repo");
        copy_tree(&self.repo, &work)
            .map_err(|e| format!("harness: cannot copy the repository: {e}"))?;
        let tmp = dir.path().join("tmp");
        let home = dir.path().join("home");
        for d in [&tmp, &home] {
            fs::create_dir_all(d)
                .map_err(|e| format!("harness: cannot create {}: {e}", d.display()))?;
        }
        let log_path = dir.path().join("output.log");
        Ok(Scratch {
            _dir: dir,
            work,
            tmp,
            home,
            log_path,
        })
    }

    /// The bash command running `body` (after the preamble) in `scratch`, in a process group of
    /// its own, with stdout and stderr both going to the scratch output file.
    fn block_command(&self, body: &str, scratch: &Scratch) -> Result<Command, String> {
        let log = fs::File::create(&scratch.log_path)
            .map_err(|e| format!("harness: cannot create the output file: {e}"))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("harness: cannot share the output file: {e}"))?;
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        );
        let script = format!("{PREAMBLE}\n{body}");
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&scratch.work)
            .env("PATH", path)
            .env("TMPDIR", &scratch.tmp)
            .env("HOME", &scratch.home)
            .env_remove("KUBECONFIG")
            .env_remove("CARGO_TARGET_DIR")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        Ok(cmd)
    }
}

/// Where one block runs; the directory is removed when this is dropped.
struct Scratch {
    _dir: tempfile::TempDir,
    /// The block's copy of the repository (its working directory).
    work: PathBuf,
    tmp: PathBuf,
    home: PathBuf,
    /// The block's interleaved stdout and stderr.
    log_path: PathBuf,
}

/// Polls `child` until it exits or `timeout` has passed since `start`.
fn wait_until(
    child: &mut std::process::Child,
    start: Instant,
    timeout: Duration,
) -> Result<std::process::ExitStatus, &'static str> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(s),
            Ok(None) if start.elapsed() >= timeout => return Err("timed out"),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return Err("lost the child"),
        }
    }
}

/// The file's text (invalid UTF-8 replaced), or empty when it cannot be read.
fn read_lossy(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// SIGTERM to the process group, then SIGKILL to what is left after a moment.
fn kill_group(pgid: u32) {
    let group = format!("-{pgid}");
    let signal = |sig: &str| {
        let _ = Command::new("kill")
            .args([sig, "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    };
    if !group_alive(pgid) {
        return;
    }
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL");
}

/// Whether a process of the group still runs (zombies do not count: they wait for a reaper, not
/// for us). Reads /proc (Linux).
fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = after.split_whitespace();
        let state = fields.next();
        let group = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        group == Some(pgid) && state != Some("Z")
    })
}

/// Copies `from` to `to` (files and directories; skips `target/` and hidden entries, symlinks
/// are followed as the files they point to).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let name = e.file_name();
        let s = name.to_string_lossy();
        if s.starts_with('.') || s == "target" {
            continue;
        }
        let src = e.path();
        let dst = to.join(&name);
        if src.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// The failure report of one block: where, the block, what happened and its output.
pub fn report(block: &Block, outcome: &Outcome) -> String {
    format!(
        "{}: runnable block failed ({}, {:.1} s)\n--- block ---\n{}--- output ---\n{}--- end ---\n",
        block.place(),
        outcome.status,
        outcome.elapsed.as_secs_f64(),
        block.body,
        outcome.output
    )
}

/// A link found in a Markdown text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// 1-based line.
    pub line: usize,
    /// The path part (empty for a same-page `#fragment` link).
    pub path: String,
    /// The `#fragment`, if any.
    pub fragment: Option<String>,
}

/// The relative links of a Markdown text, outside fenced code blocks and code spans; web and
/// mail links are left out.
pub fn relative_links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (i, line) in prose_lines(text) {
        let plain = without_code_spans(line);
        let mut rest = plain.as_str();
        while let Some(pos) = rest.find("](") {
            rest = &rest[pos + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            rest = &rest[end..];
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f.to_string())),
                None => (target, None),
            };
            out.push(Link {
                line: i,
                path: path.to_string(),
                fragment,
            });
        }
    }
    out
}

/// The lines outside fenced code blocks, 1-based.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let c = t.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = c.map_or(0, |c| t.chars().take_while(|x| *x == c).count());
        match fence {
            Some((fc, len)) => {
                if c == Some(fc) && run >= len && t[run..].trim().is_empty() {
                    fence = None;
                }
            }
            None if run >= 3 => fence = c.map(|c| (c, run)),
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// The line with its code spans removed, so `a](b)` inside backticks is not a link.
fn without_code_spans(line: &str) -> String {
    let mut plain = String::new();
    let mut in_code = false;
    for ch in line.chars() {
        if ch == '`' {
            in_code = !in_code;
        } else if !in_code {
            plain.push(ch);
        }
    }
    plain
}

/// The anchors of a Markdown text's headings as GitHub makes them: lower case, spaces to `-`,
/// everything but letters, digits, `-` and `_` dropped (a repeated heading's `-1` suffix is not
/// made; no page here needs it).
pub fn heading_anchors(text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let t = line.trim_start();
            let hashes = t.chars().take_while(|c| *c == '#').count();
            let rest = t.get(hashes..)?;
            if !(1..=6).contains(&hashes) || !rest.starts_with(' ') {
                return None;
            }
            let slug: String = rest
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            Some(slug)
        })
        .collect()
}

/// One line per relative link of the Markdown files under `root` whose file does not exist, or
/// whose `#fragment` names no heading of the Markdown file it points to.
pub fn broken_links(root: &Path) -> Result<Vec<String>, String> {
    let read = |rel: &Path| {
        fs::read_to_string(root.join(rel))
            .map_err(|e| format!("{}: cannot read: {e}", rel.display()))
    };
    let mut errors = Vec::new();
    for rel in markdown_files(root) {
        let text = read(&rel)?;
        let dir = rel.parent().unwrap_or(Path::new(""));
        for link in relative_links(&text) {
            let target = if link.path.is_empty() {
                rel.clone()
            } else {
                dir.join(&link.path)
            };
            if !root.join(&target).exists() {
                errors.push(format!(
                    "{}:{}: link to `{}`: no such file",
                    rel.display(),
                    link.line,
                    link.path
                ));
                continue;
            }
            let Some(fragment) = &link.fragment else {
                continue;
            };
            if target.extension().is_some_and(|e| e == "md") && !fragment.is_empty() {
                let anchors = heading_anchors(&read(&target)?);
                if !anchors.iter().any(|a| a == fragment) {
                    errors.push(format!(
                        "{}:{}: link to `{}#{fragment}`: no such heading",
                        rel.display(),
                        link.line,
                        link.path
                    ));
                }
            }
        }
    }
    Ok(errors)
}
