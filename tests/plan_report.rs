//! `plan --output html`: the page, opened from the file in a real headless browser (Debian's
//! `chromium`; `.ci/run` installs it), shows the plan's counts and filters its rows; and the JSON
//! contract's version-2 fields.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOW: &str = "2026-01-10T00:00:00Z";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
}

fn plan_json() -> serde_json::Value {
    let out = bin()
        .args(["plan", "-o", "json", "--now", NOW])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn write_report(dir: &Path) -> PathBuf {
    let file = dir.join("report.html");
    let out = bin()
        .args(["plan", "--now", NOW, "--output", "html"])
        .arg(&file)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

/// The browser: `$CHROMIUM`, else `chromium` on PATH.
fn chromium() -> PathBuf {
    let exe = std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("chromium"), PathBuf::from);
    let found = Command::new(&exe)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test needs a headless browser: install Debian's `chromium` (apt-get install chromium; .ci/run does) or set CHROMIUM"
    );
    exe
}

/// Runs headless chromium on `url` with `extra` flags, bounded by 90 s; returns stdout.
fn browse(url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("reader")
}

/// The text of the element with `id` in a dumped DOM (`<tag id="id">text<`).
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element #{id} in the page"));
    let rest = &dom[at..];
    let start = rest.find('>').expect("tag end") + 1;
    let end = rest[start..].find('<').expect("text end");
    &rest[start..start + end]
}

/// The rows of the evictions table body as cell texts.
fn table_rows(dom: &str) -> Vec<Vec<String>> {
    let at = dom.find("id=\"rows\"").expect("the evictions table");
    let body = &dom[at..];
    let body =
        &body[body.find("<tbody>").expect("tbody")..body.find("</tbody>").expect("tbody end")];
    body.split("<tr>")
        .skip(1)
        .map(|tr| {
            tr.split("<td")
                .skip(1)
                .map(|td| {
                    let start = td.find('>').map_or(0, |i| i + 1);
                    let end = td.find("</td>").unwrap_or(td.len());
                    td[start..end]
                        .replace("&amp;", "&")
                        .replace("&gt;", ">")
                        .replace("&lt;", "<")
                })
                .collect()
        })
        .collect()
}

fn url(file: &Path, fragment: &str) -> String {
    format!("file://{}{fragment}", file.display())
}

#[test]
fn the_report_in_a_real_browser_shows_the_plans_counts_and_filters_by_plugin() {
    let json = plan_json();
    let dir = tempfile::tempdir().expect("temp dir");
    let report = write_report(dir.path());
    let page = std::fs::read_to_string(&report).expect("read report");
    assert!(
        !page.contains("http://") && !page.contains("https://") && !page.contains(" src="),
        "the page is self-contained"
    );

    let dom = browse(&url(&report, ""), &["--dump-dom"]);
    let s = &json["summary"];
    for (id, key) in [
        ("count-evicted", "evicted"),
        ("count-deflected", "deflected"),
        ("count-denied", "denied"),
        ("count-errors", "errors"),
        ("count-pods", "pods"),
    ] {
        assert_eq!(text_of(&dom, id), s[key].to_string(), "#{id}");
    }
    let attempts = json["evictions"].as_array().expect("evictions").len();
    assert!(attempts > 5, "the example plans several evictions");
    // The script ran: the table counts come from the embedded rows.
    assert_eq!(text_of(&dom, "total-count"), attempts.to_string());
    assert_eq!(text_of(&dom, "match-count"), attempts.to_string());
    let rows = table_rows(&dom);
    assert_eq!(rows.len(), attempts.min(100), "one page of rows");
    let first = &json["evictions"][0];
    assert_eq!(
        rows[0][0],
        format!(
            "{}/{}",
            first["namespace"].as_str().unwrap_or_default(),
            first["name"].as_str().unwrap_or_default()
        )
    );
    assert_eq!(rows[0][5], first["reason"].as_str().unwrap_or_default());

    // Filtered by one plugin (the fragment sets the filter, as the select does).
    let plugin = "RemoveDuplicates";
    let expected: Vec<(String, String)> = json["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .filter(|e| e["plugin"] == plugin)
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap_or_default(),
                    e["name"].as_str().unwrap_or_default()
                ),
                e["outcome"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(expected.len() >= 2, "{expected:?}");
    let dom = browse(&url(&report, &format!("#plugin={plugin}")), &["--dump-dom"]);
    let rows = table_rows(&dom);
    let shown: Vec<(String, String)> = rows.iter().map(|r| (r[0].clone(), r[4].clone())).collect();
    assert_eq!(shown, expected);
    assert!(rows.iter().all(|r| r[3] == plugin));
    assert_eq!(text_of(&dom, "match-count"), expected.len().to_string());

    // And by outcome.
    let denied = json["summary"]["denied"].as_u64().unwrap_or_default() as usize;
    let dom = browse(&url(&report, "#outcome=denied"), &["--dump-dom"]);
    assert_eq!(table_rows(&dom).len(), denied);
}

#[test]
fn the_json_contract_adds_reason_code_detail_and_its_version() {
    let json = plan_json();
    assert_eq!(json["contractVersion"], 2);
    for e in json["evictions"].as_array().expect("evictions") {
        // Every version-1 field is still there.
        for key in [
            "namespace",
            "name",
            "node",
            "profile",
            "plugin",
            "reason",
            "outcome",
        ] {
            assert!(e[key].is_string(), "{key} in {e}");
        }
        assert!(e["reasonCode"].is_string(), "{e}");
        assert!(e["reasonDetail"].is_object(), "{e}");
    }
    assert!(json["nodeUsage"].is_array());
}

/// `--explain` on the bundled example: a PodDisruptionBudget that denies, the guard that deflects,
/// and the DefaultEvictor rules that stop a DaemonSet pod — in the table and in the JSON.
#[test]
fn explain_names_the_pdb_the_guard_verdict_and_the_evictor_rule() {
    let out = bin()
        .args(["plan", "-o", "json", "--now", NOW])
        .args(["--explain", "shop/cache-74c6d8b9f-g5h6i"])
        .args(["--explain", "shop/api-6f4b9d7c8-q9r2t"])
        .args(["--explain", "kube-system/kube-proxy-1x"])
        .args(["--explain-node", "node-4", "--explain-node", "nowhere"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let answers = json["explanations"].as_array().expect("explanations");
    assert_eq!(answers.len(), 3);
    let verdict = |a: &serde_json::Value, plugin: &str| -> (String, String) {
        let v = a["profiles"][0]["plugins"]
            .as_array()
            .expect("plugins")
            .iter()
            .find(|v| v["plugin"] == plugin)
            .unwrap_or_else(|| panic!("{plugin} in {a}"));
        (
            v["verdict"].as_str().unwrap_or_default().to_string(),
            v["detail"].as_str().unwrap_or_default().to_string(),
        )
    };
    let cache = &answers[0];
    assert_eq!(
        cache["pdbs"][0],
        "PodDisruptionBudget shop/cache: disruptionsAllowed 1"
    );
    let (v, d) = verdict(cache, "RemovePodsViolatingTopologySpreadConstraint");
    assert_eq!(v, "selected");
    assert!(
        d.contains("→ denied") && d.contains("PodDisruptionBudget shop/cache"),
        "{d}"
    );

    let (v, d) = verdict(&answers[1], "LowNodeUtilization");
    assert_eq!(v, "selected");
    assert!(
        d.contains("→ deflected") && d.contains("rolling restart"),
        "{d}"
    );

    let proxy = &answers[2];
    let filter: Vec<&str> = proxy["profiles"][0]["filter"]
        .as_array()
        .expect("filter")
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    assert!(filter.iter().any(|r| r.contains("daemonset")), "{filter:?}");
    assert!(
        filter.iter().any(|r| r.contains("local storage")),
        "{filter:?}"
    );
    assert_eq!(verdict(proxy, "PodLifeTime").0, "filtered");

    let nodes = json["nodeExplanations"]
        .as_array()
        .expect("nodeExplanations");
    assert!(nodes.iter().any(|n| {
        n["node"] == "nowhere"
            && n["lines"][0]
                .as_str()
                .is_some_and(|l| l.contains("no node nowhere"))
    }));

    // The table prints the same answers after the plan.
    let out = bin()
        .args([
            "plan",
            "--now",
            NOW,
            "--explain",
            "shop/cache-74c6d8b9f-g5h6i",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("explain shop/cache-74c6d8b9f-g5h6i (node node-4):"),
        "{text}"
    );
    assert!(
        text.contains("  PodDisruptionBudget shop/cache: disruptionsAllowed 1"),
        "{text}"
    );
}
