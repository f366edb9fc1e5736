//! The percentage and per-workload eviction limits through `plan` as users run it: refusals by
//! those limits in the table, the JSON and the HTML page; bad values exit 2 naming the field; and
//! the oracle check that an upstream policy (none of the new fields) plans byte for byte as
//! before the limits existed.

mod cli_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use cli_common::{NOW, bin, config_error_with_file, succeeds};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn plan(args: &[&str]) -> Output {
    succeeds(bin().arg("plan").args(args).args(["--now", NOW]))
}

/// The bundled example policy with the new limits added.
fn limits_policy(dir: &tempfile::TempDir) -> PathBuf {
    let text = std::fs::read_to_string(root().join("examples/policy.yaml")).expect("example");
    assert!(text.contains("\nmaxNoOfPodsToEvictPerNode: 5\n"));
    let text = text.replace(
        "\nmaxNoOfPodsToEvictPerNode: 5\n",
        "\nmaxNoOfPodsToEvictPerNode: \"25%\"\nmaxNoOfPodsToEvictPerWorkload: \"34%\"\nmaxUnavailablePerWorkload: 1\n",
    );
    let p = dir.path().join("limits.yaml");
    std::fs::write(&p, text).expect("write policy");
    p
}

#[test]
fn refusals_by_the_new_limits_are_in_the_table_the_json_and_the_html() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = limits_policy(&dir);
    let policy = policy.to_str().expect("utf-8 path");

    let json = plan(&["--policy", policy, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    let refusals = v["limitRefusals"].as_array().expect("limitRefusals");
    let find = |limit: &str| {
        refusals
            .iter()
            .find(|r| r["limit"] == limit)
            .unwrap_or_else(|| panic!("no {limit} refusal in {refusals:?}"))
    };
    let node = find("node");
    assert_eq!(node["effect"], "ends the node");
    assert_eq!(
        node["result"],
        "maximum number of evicted pods per node reached"
    );
    let msg = node["message"].as_str().expect("message");
    assert!(
        msg.starts_with("maximum number of evicted pods per node reached (limit 25% of "),
        "{msg}"
    );
    let unavailable = find("unavailable");
    assert_eq!(unavailable["effect"], "skips the pod");
    assert!(
        unavailable["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("workload Deployment shop/")
                && m.ends_with("maxUnavailablePerWorkload 1 = 1")),
        "{unavailable}"
    );
    // No Deployment's pod was evicted twice past 1 unavailable.
    let evicted_web = v["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .filter(|e| {
            e["namespace"] == "shop"
                && e["name"].as_str().is_some_and(|n| n.starts_with("web-"))
                && (e["outcome"] == "evicted" || e["outcome"] == "deflected")
        })
        .count();
    assert_eq!(evicted_web, 1);

    let table = String::from_utf8(plan(&["--policy", policy]).stdout).expect("utf-8");
    assert!(
        table.contains(&format!("LIMIT REFUSALS ({})", refusals.len())),
        "{table}"
    );
    assert!(table.contains("skips the pod") && table.contains("ends the node"));

    let html = dir.path().join("plan.html");
    plan(&[
        "--policy",
        policy,
        "-o",
        "html",
        html.to_str().expect("utf-8 path"),
    ]);
    let page = std::fs::read_to_string(&html).expect("html written");
    assert!(
        page.contains("<section id=\"limit-refusals\">"),
        "no section"
    );
    assert!(page.contains("maxUnavailablePerWorkload 1 = 1"));

    let explain = String::from_utf8(
        plan(&["--policy", policy, "--explain", "shop/web-7c9f8d6b5-x2m4q"]).stdout,
    )
    .expect("utf-8");
    assert!(
        explain.contains("selected, but not attempted: workload Deployment shop/web"),
        "{explain}"
    );
}

#[test]
fn bad_limit_values_exit_2_naming_the_field() {
    for (field, bad) in [
        ("maxNoOfPodsToEvictPerNamespace", "\"150%\""),
        ("maxNoOfPodsToEvictPerNode", "-1"),
        ("maxNoOfPodsToEvictPerWorkload", "abc"),
        ("maxUnavailablePerWorkload", "\"10.5%\""),
    ] {
        let err = config_error_with_file(
            &["plan", "--policy"],
            "bad.yaml",
            &format!(
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n{field}: {bad}\nprofiles: []\n"
            ),
        );
        assert!(err.contains(field), "{field}: {bad}: {err}");
    }
}

/// FNV-1a (64 bits): a stable fingerprint of a plan too large to keep in the repository.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The oracle: `plan -o json` of policies without the new fields, fingerprinted from the binary
/// built before the percentage and per-workload limits existed (commit 7d3a49c). A change here means an upstream policy decides
/// differently — or the plan contract changed on purpose; then regenerate the fingerprints with
/// that commit's binary (the commands are in docs/eviction-limits.md).
#[test]
fn upstream_policies_plan_exactly_as_before() {
    // The bundled example.
    let out = plan(&["-o", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("limitRefusals"));
    assert_eq!(
        (out.stdout.len(), fnv1a(&out.stdout)),
        BUNDLED_EXAMPLE,
        "plan -o json of the bundled example changed"
    );
    // The bench cluster (synthetic, seed 42) at 1,000 nodes / 30,000 pods with the all-plugins
    // policy (its integer node limit and every plugin: many limit refusals).
    // Written where the engine_cycle bench keeps its clusters (the same file for 1000 30000).
    let data = root().join("target").join("bench-data");
    std::fs::create_dir_all(&data).expect("bench-data directory");
    let cluster = data.join("cluster-1000-30000.json");
    if !cluster.exists() {
        let tmp = data.join(format!("cluster-1000-30000.json.{}", std::process::id()));
        std::fs::write(
            &tmp,
            kube_descheduler::testing::synthetic_cluster_json(1000, 30_000, 42),
        )
        .expect("write cluster");
        std::fs::rename(&tmp, &cluster).expect("rename cluster");
    }
    let out = plan(&[
        "--snapshot",
        cluster.to_str().expect("utf-8 path"),
        "--policy",
        "benches/all-plugins-policy.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(
        (out.stdout.len(), fnv1a(&out.stdout)),
        BENCH_CLUSTER,
        "plan -o json of the bench cluster changed"
    );
}

/// (bytes, FNV-1a) of `plan -o json --now 2026-01-10T00:00:00Z` (bundled example). The example's
/// objects were reordered into the API's (namespace, name) order after 7d3a49c, which changes which
/// of the equal `web` replicas RemoveDuplicates and LowNodeUtilization pick; this fingerprint is
/// that of main at 8e2639a (the limits merged) on the reordered file, the same as 7d3a49c's
/// fingerprint (8439401663832063967) was on the old order.
const BUNDLED_EXAMPLE: (usize, u64) = (14138, 9822332881177515758);
/// (bytes, FNV-1a) of the bench cluster's plan (see the test). The synthetic file is not in the
/// API's (namespace, name) order; since the snapshot loader orders every kind as the API lists it,
/// this is the plan 378786b gives on that file sorted into API order (checked byte for byte).
const BENCH_CLUSTER: (usize, u64) = (6559031, 4069018594295588765);
