//! The side-by-side bench's reading and arithmetic (`benches/upstream_side_by_side/report.rs`):
//! upstream's go.mod replaces, both binaries' eviction counts, medians and ratios, the table.

#[path = "../benches/upstream_side_by_side/report.rs"]
mod report;

use report::*;

#[test]
fn replaces_are_read_in_both_forms_without_comments() {
    let go_mod = "module sigs.k8s.io/descheduler\n\ngo 1.26.0\n\nrequire (\n\tk8s.io/api v0.36.1\n\tk8s.io/kube-openapi v0.31.0 // indirect\n)\n\n\
replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102 // pinned\n\
replace (\n\tfoo.io/a => ./a\n\t// a comment => not a replace\n\tfoo.io/b v1.0.0 => foo.io/b v1.0.1\n)\n";
    assert_eq!(
        go_mod_replaces(go_mod),
        vec![
            "k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102",
            "foo.io/a => ./a",
            "foo.io/b v1.0.0 => foo.io/b v1.0.1",
        ]
    );
    assert_eq!(go_mod_go_version(go_mod), Some("1.26.0"));
    assert!(go_mod_replaces("module x\nrequire y v1\n").is_empty());
    assert_eq!(
        build_go_mod(go_mod, "sigs.k8s.io/descheduler", "v0.36.0"),
        "module kube-descheduler.bench/upstream\n\ngo 1.26.0\n\nrequire sigs.k8s.io/descheduler v0.36.0\n\
\nreplace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102\n\
\nreplace foo.io/a => ./a\n\
\nreplace foo.io/b v1.0.0 => foo.io/b v1.0.1\n"
    );
    assert_eq!(go_mod_go_version("module x\n"), None);
}

#[test]
fn eviction_counts_are_read_from_each_binary_s_log() {
    let klog = r#"I1128 16:40:01.123456   42 descheduler.go:252] "Number of evictions/requests" totalEvicted=1234 evictionRequests=0"#;
    assert_eq!(upstream_evictions(klog), Some(1234));
    assert_eq!(
        upstream_evictions(r#"I1128 "Evicted pod in dry run mode" pod="a/b" totalEvicted=9"#),
        None,
        "only the end-of-cycle line counts"
    );
    assert_eq!(
        upstream_evictions(r#""Number of evictions/requests" totalEvicted="#),
        None
    );
    let ours = r#"{"level":"INFO","fields":{"message":"descheduling cycle finished","evicted":53565,"duration_seconds":0.4}}"#;
    assert_eq!(own_evictions(ours), Some(53565));
    assert_eq!(
        own_evictions(r#"{"fields":{"message":"listing","evicted":3}}"#),
        None
    );
    assert_eq!(own_evictions("not json"), None);
}

#[test]
fn medians_and_ratios() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(vec![4.0, 1.0]), Some(1.0), "the lower middle");
    assert_eq!(median(Vec::new()), None);
    assert_eq!(ratio(Some(50.0), Some(2.0)), Some(25.0));
    assert_eq!(ratio(Some(50.0), Some(0.0)), None);
    assert_eq!(ratio(None, Some(2.0)), None);
}

#[test]
fn the_table_shows_medians_ratios_and_evictions() {
    let run = |wall_s, peak_rss_mib, evictions| Run {
        wall_s,
        peak_rss_mib,
        evictions,
        finished: true,
    };
    let table = table(&[Compared {
        nodes: 1000,
        pods: 30000,
        ours: vec![
            run(1.0, 60.0, Some(10)),
            run(3.0, 64.0, Some(10)),
            run(2.0, 62.0, Some(10)),
        ],
        upstream: vec![run(40.0, 900.0, Some(12))],
        load: 1.5,
    }]);
    let row = table.lines().nth(2).expect("a row");
    assert_eq!(
        row,
        "| 1000 / 30000 | 3 / 1 | 2.00 | 40.00 | 20.0 | 62 | 900 | 14.5 | 10 | 12 | 1.50 |"
    );
    let missing = report::table(&[Compared {
        nodes: 5,
        pods: 6,
        ours: vec![run(1.0, 10.0, None)],
        upstream: Vec::new(),
        load: 0.0,
    }]);
    assert!(
        missing
            .lines()
            .nth(2)
            .expect("a row")
            .starts_with("| 5 / 6 | 1 / 0 | 1.00 | - | - | 10 | - | - | ? |  |"),
        "{missing}"
    );
}

/// A run the bench stopped at its timeout is a lower bound: upstream's time and memory and the
/// multiples get `>` / `≥`, its evictions say it did not finish; if only ours was stopped, the
/// multiples are upper bounds.
#[test]
fn a_run_stopped_at_the_timeout_is_shown_as_a_bound() {
    let run = |wall_s, peak_rss_mib, evictions, finished| Run {
        wall_s,
        peak_rss_mib,
        evictions,
        finished,
    };
    let row = |ours: Vec<Run>, upstream: Vec<Run>| {
        let t = table(&[Compared {
            nodes: 5000,
            pods: 150000,
            ours,
            upstream,
            load: 1.25,
        }]);
        t.lines().nth(2).expect("a row").to_string()
    };
    assert_eq!(
        row(
            vec![run(2.0, 200.0, Some(34144), true)],
            vec![run(2400.0, 4400.0, None, false)]
        ),
        "| 5000 / 150000 | 1 / 1 | 2.00 | > 2400.00 | > 1200.0 | 200 | ≥ 4400 | ≥ 22.0 | 34144 | unfinished | 1.25 |"
    );
    assert_eq!(
        row(
            vec![run(10.0, 200.0, None, false)],
            vec![run(20.0, 400.0, Some(5), true)]
        ),
        "| 5000 / 150000 | 1 / 1 | > 10.00 | 20.00 | < 2.0 | ≥ 200 | 400 | ≤ 2.0 | unfinished | 5 | 1.25 |"
    );
    assert_eq!(
        row(
            vec![run(10.0, 200.0, None, false)],
            vec![run(20.0, 400.0, None, false)]
        ),
        "| 5000 / 150000 | 1 / 1 | > 10.00 | > 20.00 | - | ≥ 200 | ≥ 400 | - | unfinished | unfinished | 1.25 |"
    );
}
