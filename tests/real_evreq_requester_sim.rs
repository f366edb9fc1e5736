//! `run --eviction-api EvictionRequest` against the API stand-in (kube-sim serves no
//! `lifecycle.k8s.io/v1alpha1`): start fails with exit 1, naming the flag and the
//! EvictionRequestAPI gate, before any cycle. No control plane needed.

mod run_sim_common;

use run_sim_common::*;

#[tokio::test]
async fn without_the_api_run_fails_at_start_naming_the_flag_and_the_gate() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 2, TAINTED))).await;
    let flags = ["--eviction-api", "EvictionRequest"];
    let (d, code) = run_to_exit(&sim, "d", &policy(""), &flags).await;
    assert_eq!(code, 1, "{}", d.log_text());
    let log = d.log_text();
    for word in [
        "--eviction-api",
        "EvictionRequestAPI",
        "lifecycle.k8s.io/v1alpha1",
    ] {
        assert!(log.contains(word), "{word} not named:\n{log}");
    }
    assert!(!log.contains("descheduling cycle finished"), "{log}");
    assert!(!evicted(&sim, "web-1") && !evicted(&sim, "web-2"), "{log}");
}
