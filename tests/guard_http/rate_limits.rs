//! The guard's per-peer rate limits: the token buckets and the records, on the guard's review path (no HTTP).

use super::*;
use kube_descheduler::guard::rate::{Rate, RateLimits};
use kube_descheduler::guard::review::{ParsedReview, parse_review};
use kube_descheduler::peer::Peer;

/// A restarter that always answers `outcome` and keeps the requests.
struct Answering {
    outcome: RestartOutcome,
    calls: Mutex<Vec<RestartRequest>>,
}

impl Restarter for Answering {
    fn restart(&self, req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        self.calls.lock().unwrap().push(req);
        Box::pin(std::future::ready(self.outcome.clone()))
    }
}

fn one_at_a_time() -> RateLimits {
    let hour = Rate {
        tokens: 1,
        period: Duration::from_secs(3600),
    };
    RateLimits {
        rate: hour,
        burst: 5,
        namespace_rate: hour,
        namespace_burst: 1,
    }
}

async fn review(state: &GuardState, peer: &Peer) -> Value {
    let body = serde_json::to_vec(&eviction_review(
        "policy/v1",
        json!({"preconditions": {"uid": "pod-uid"}}),
        false,
    ))
    .unwrap();
    let ParsedReview::Eviction { request, eviction } = parse_review(&body).unwrap() else {
        panic!("not an eviction review");
    };
    let answer = state.review_eviction_from(&request, &eviction, peer).await;
    serde_json::to_value(answer).unwrap()["response"].clone()
}

fn state(restarter: Arc<Answering>) -> GuardState {
    GuardState::new(Arc::new(cluster(dep())), restarter, GuardConfig::default())
        .with_rate_limits(one_at_a_time())
}

#[tokio::test]
async fn an_empty_bucket_answers_429_saying_so_and_restarts_nothing() {
    let restarter = Arc::new(Answering {
        outcome: RestartOutcome::Restarted {
            at: Timestamp::now(),
        },
        calls: Mutex::default(),
    });
    let state = state(restarter.clone());
    let peer = Peer {
        addr: Some("10.0.0.10:51234".parse().unwrap()),
        subject: Some("CN=kube-apiserver".into()),
    };
    let first = review(&state, &peer).await;
    assert_deflection(&first);
    let second = review(&state, &peer).await;
    let msg = denied_429(&second);
    assert!(
        msg.contains("rate limited") && msg.contains("namespace shop"),
        "{msg}"
    );
    assert!(!msg.contains("Eviction triggered evacuation"), "{msg}");
    let calls = restarter.calls.lock().unwrap();
    assert_eq!(calls.len(), 1, "the second review reached the restarter");
    // The restart carries who asked: userInfo and UID from the review, the connection's peer.
    let audit = &calls[0].audit;
    assert_eq!(
        audit.username,
        "system:serviceaccount:kube-system:cluster-autoscaler"
    );
    assert_eq!(audit.groups, vec!["system:authenticated".to_string()]);
    assert_eq!(audit.review_uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(audit.peer_addr, "10.0.0.10:51234");
    assert_eq!(audit.peer_subject.as_deref(), Some("CN=kube-apiserver"));
    let text = audit.to_string();
    assert!(
        text.contains("with client certificate CN=kube-apiserver"),
        "{text}"
    );
}

#[tokio::test]
async fn a_restart_already_in_flight_takes_no_token() {
    let restarter = Arc::new(Answering {
        outcome: RestartOutcome::InFlight {
            at: Timestamp::now(),
        },
        calls: Mutex::default(),
    });
    let state = state(restarter.clone());
    // The namespace bucket holds one token; every review finds the rollout in flight, so each
    // gives its token back and none is refused for the rate.
    for _ in 0..4 {
        let r = review(&state, &Peer::default()).await;
        assert_deflection(&r);
        let msg = r["status"]["message"].as_str().unwrap();
        assert!(!msg.contains("rate limited"), "{msg}");
    }
    assert_eq!(restarter.calls.lock().unwrap().len(), 4);
}
