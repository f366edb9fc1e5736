//! `plan --output html`: the page, opened from the file in a real headless browser (Debian's
//! `chromium`, driven over WebDriver by `chromedriver` from `chromium-driver`; `.ci/run` installs
//! both), shows the plan's counts, filters and sorts its rows through its own controls; and the
//! JSON contract's version-2 fields.

mod cli_common;
mod webdriver_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use webdriver_common::Browser;

use cli_common::{NOW, bin, succeeds};

fn plan_json() -> serde_json::Value {
    cli_common::plan_json(&[])
}

fn write_report(dir: &Path) -> PathBuf {
    let file = dir.join("report.html");
    succeeds(
        bin()
            .args(["plan", "--now", NOW, "--output", "html"])
            .arg(&file),
    );
    file
}

fn url(file: &Path, fragment: &str) -> String {
    format!("file://{}{fragment}", file.display())
}

/// `namespace/name` of a JSON eviction.
fn pod_of(e: &serde_json::Value) -> String {
    format!(
        "{}/{}",
        e["namespace"].as_str().unwrap_or_default(),
        e["name"].as_str().unwrap_or_default()
    )
}

/// A JSON eviction as the table shows it: pod, node, profile, plugin, outcome, reason.
fn row_of(e: &serde_json::Value) -> Vec<String> {
    let mut row = vec![pod_of(e)];
    for key in ["node", "profile", "plugin", "outcome", "reason"] {
        row.push(e[key].as_str().unwrap_or_default().to_string());
    }
    row
}

/// The rows of the evictions table as the browser shows them (first six cells: pod … reason).
async fn shown_rows(b: &Browser) -> Vec<Vec<String>> {
    let v = b
        .execute(
            "return Array.from(document.querySelectorAll('#rows tbody tr'))\
             .map(tr => Array.from(tr.cells).slice(0, 6).map(td => td.textContent));",
        )
        .await
        .expect("read the table");
    serde_json::from_value(v).expect("rows of strings")
}

async fn shown_count(b: &Browser, id: &str) -> usize {
    let t = b.text(&format!("#{id}")).await.expect("count");
    t.parse()
        .unwrap_or_else(|_| panic!("#{id} shows a number, not {t:?}"))
}

/// Chooses `value` in the `<select id=select>` by clicking its option, as a person does.
async fn choose(b: &Browser, select: &str, value: &str) {
    b.click_on(&format!("#{select} option[value=\"{value}\"]"))
        .await
        .expect("choose the option");
    let chosen = b.property(&format!("#{select}"), "value").await;
    assert_eq!(chosen.expect("value"), value, "#{select}");
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The page as a person uses it, in a real headless chromium driven over WebDriver
/// (chromedriver): opened from the file, the counts equal the JSON's; the plugin, outcome and
/// node filters (the page's own controls) show exactly the JSON's matching rows; a click on a
/// column header sorts the rows and a second click reverses the order.
#[test]
fn the_report_in_a_real_browser_counts_filters_and_sorts_like_the_json() {
    let json = plan_json();
    let evictions = json["evictions"].as_array().expect("evictions").clone();
    let dir = tempfile::tempdir().expect("temp dir");
    let report = write_report(dir.path());
    let page = std::fs::read_to_string(&report).expect("read report");
    assert!(
        !page.contains("http://") && !page.contains("https://") && !page.contains(" src="),
        "the page is self-contained"
    );
    let all: Vec<Vec<String>> = evictions.iter().map(row_of).collect();
    assert!(
        all.len() > 5 && all.len() <= 100,
        "the example plans several evictions, one page: {}",
        all.len()
    );

    tokio().block_on(async {
        let b = Browser::start().await.expect("start headless chromium");
        b.goto(&url(&report, "")).await.expect("open the report");

        let s = &json["summary"];
        for (id, key) in [
            ("count-evicted", "evicted"),
            ("count-deflected", "deflected"),
            ("count-denied", "denied"),
            ("count-errors", "errors"),
            ("count-pods", "pods"),
        ] {
            assert_eq!(
                b.text(&format!("#{id}")).await.expect(id),
                s[key].to_string(),
                "#{id}"
            );
        }
        // The script ran: the table counts and rows come from the embedded plan, in its order.
        assert_eq!(shown_count(&b, "total-count").await, all.len());
        assert_eq!(shown_count(&b, "match-count").await, all.len());
        assert_eq!(shown_rows(&b).await, all);

        // Filter by one plugin through the plugin select.
        let plugin = "RemoveDuplicates";
        let expected: Vec<Vec<String>> = all.iter().filter(|r| r[3] == plugin).cloned().collect();
        assert!(expected.len() >= 2, "{expected:?}");
        choose(&b, "f-plugin", plugin).await;
        assert_eq!(shown_rows(&b).await, expected);
        assert_eq!(shown_count(&b, "match-count").await, expected.len());
        assert_eq!(shown_count(&b, "total-count").await, all.len());
        // The filtered view can be linked: the page wrote it into the URL.
        let hash = b.execute("return location.hash;").await.expect("hash");
        assert_eq!(hash, format!("#plugin={plugin}"));

        // Back to all plugins, then sort by node: a click sorts ascending (ties keep the plan's
        // order), a second click descending.
        choose(&b, "f-plugin", "").await;
        assert_eq!(shown_rows(&b).await, all);
        let mut ascending = all.clone();
        ascending.sort_by(|a, b| a[1].cmp(&b[1]));
        let mut descending = all.clone();
        descending.sort_by(|a, b| b[1].cmp(&a[1]));
        assert_ne!(
            ascending, all,
            "the example's plan is not already sorted by node"
        );
        b.click_on("th[data-key=\"1\"]").await.expect("click node");
        assert_eq!(shown_rows(&b).await, ascending);
        let class = b.property("th[data-key=\"1\"]", "className").await;
        assert_eq!(class.expect("class"), "asc");
        b.click_on("th[data-key=\"1\"]")
            .await
            .expect("click node again");
        assert_eq!(shown_rows(&b).await, descending);
        let class = b.property("th[data-key=\"1\"]", "className").await;
        assert_eq!(class.expect("class"), "desc");
        // Sorting by pod name is the same kind of order on another column.
        b.click_on("th[data-key=\"0\"]").await.expect("click pod");
        let mut by_pod = all.clone();
        by_pod.sort_by(|a, b| a[0].cmp(&b[0]));
        assert_eq!(shown_rows(&b).await, by_pod);

        // Filter by outcome (the sort stays).
        let denied = s["denied"].as_u64().unwrap_or_default() as usize;
        assert!(denied > 0, "the example has denied evictions");
        choose(&b, "f-outcome", "denied").await;
        let want: Vec<Vec<String>> = by_pod
            .iter()
            .filter(|r| r[4] == "denied")
            .cloned()
            .collect();
        assert_eq!(want.len(), denied);
        assert_eq!(shown_rows(&b).await, want);
        choose(&b, "f-outcome", "").await;

        // Filter by node: typed into the node box, matched as a substring ignoring case.
        let node = all[0][1].clone();
        let typed = node.to_uppercase();
        let input = b.find("#f-node").await.expect("node box");
        b.type_into(&input, &typed).await.expect("type a node");
        let want: Vec<Vec<String>> = by_pod
            .iter()
            .filter(|r| r[1].to_lowercase().contains(&node.to_lowercase()))
            .cloned()
            .collect();
        assert!(
            !want.is_empty() && want.len() < all.len(),
            "{node}: {want:?}"
        );
        let shown = b
            .wait_for(Duration::from_secs(10), || async {
                let rows = shown_rows(&b).await;
                Ok((rows.len() == want.len()).then_some(rows))
            })
            .await
            .unwrap_or_else(|e| panic!("node filter {typed}: {e}"));
        assert_eq!(shown, want);
        assert_eq!(shown_count(&b, "match-count").await, want.len());
        // Backspace key by key empties the box again.
        let backspaces = "\u{E003}".repeat(typed.chars().count());
        b.type_into(&input, &backspaces).await.expect("backspace");
        assert_eq!(b.property("#f-node", "value").await.expect("value"), "");
        assert_eq!(shown_rows(&b).await, by_pod);

        // A fragment link opens the filtered view with the select showing the filter.
        b.goto(&url(&report, &format!("#plugin={plugin}&outcome=denied")))
            .await
            .expect("open a link");
        b.execute("location.reload(); return null;")
            .await
            .expect("reload");
        let linked = b
            .wait_for(Duration::from_secs(10), || async {
                Ok(b.property("#f-plugin", "value")
                    .await
                    .ok()
                    .filter(|v| v == plugin))
            })
            .await;
        assert!(linked.is_ok(), "{linked:?}");
        let want: Vec<Vec<String>> = all
            .iter()
            .filter(|r| r[3] == plugin && r[4] == "denied")
            .cloned()
            .collect();
        assert_eq!(shown_rows(&b).await, want);

        // PLAN_REPORT_SCREENSHOT=docs/plan-report.png refreshes the screenshot in docs/plan.md.
        if let Some(path) = std::env::var_os("PLAN_REPORT_SCREENSHOT") {
            b.resize(1400, 1500).await.expect("resize");
            b.goto(&url(&report, "")).await.expect("open the report");
            let png = b.screenshot().await.expect("screenshot");
            assert!(png.starts_with(b"\x89PNG"), "a PNG");
            std::fs::write(&path, png).expect("write the screenshot");
        }
    });
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
    let json = cli_common::plan_json(&[
        "--explain",
        "shop/cache-74c6d8b9f-g5h6i",
        "--explain",
        "shop/api-6f4b9d7c8-q9r2t",
        "--explain",
        "kube-system/kube-proxy-1x",
        "--explain-node",
        "node-4",
        "--explain-node",
        "nowhere",
    ]);
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
