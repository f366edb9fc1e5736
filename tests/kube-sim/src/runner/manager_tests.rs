//! The manager driven step by step with its change stream held back: a ReplicaSet sync that
//! runs before the index has taken in what the store holds (its own create, or pods written just
//! before the ReplicaSet) replaces an evicted pod once and deletes no sibling.
use std::sync::Arc;
use std::time::Duration;

use jiff::SignedDuration;
use serde_json::{Value, json};
use tokio::sync::broadcast::Receiver;

use super::*;
use crate::store::DeleteOpts;
use crate::{Sim, SimHandle};

const NS: &str = "default";

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

fn replica_set(name: &str, replicas: usize) -> Value {
    crate::fixtures::replica_set(NS, name, replicas, 30)
}

/// A Running, Ready pod of ReplicaSet `rs` on `node_name`.
fn rs_pod(rs: &str, pod: &str, node_name: &str) -> Value {
    let mut p = new_pod(rs, pod, node_name);
    p["status"] = json!({"phase": "Running",
                         "conditions": [{"type": "Ready", "status": "True",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    p
}

/// A pod of ReplicaSet `rs` just bound to `node_name` (no status yet: Pending).
fn new_pod(rs: &str, pod: &str, node_name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod, "namespace": NS, "uid": format!("pod-{pod}"), "labels": {"app": rs},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                 "uid": format!("rs-{rs}"), "controller": true,
                                 "blockOwnerDeletion": true}]
        },
        "spec": {"nodeName": node_name, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": format!("{rs}:1")}]}
    })
}

/// ReplicaSet `web` of 2 and its two Running pods, both on n1.
fn web_with_two_pods_on_n1() -> Vec<Value> {
    vec![
        replica_set("web", 2),
        rs_pod("web", "web-1", "n1"),
        rs_pod("web", "web-2", "n1"),
    ]
}

/// The sim with `objects`, plus Ready nodes n1 and n2 unless `objects` has its own.
async fn start(objects: Vec<Value>) -> SimHandle {
    let given = |n: &str| {
        objects
            .iter()
            .any(|o| o["kind"] == "Node" && o["metadata"]["name"] == n)
    };
    let mut all: Vec<Value> = ["n1", "n2"]
        .into_iter()
        .filter(|n| !given(n))
        .map(node)
        .collect();
    all.extend(objects);
    Sim::start_static(all).await.expect("kube-sim starts")
}

/// A manager over the sim's store, subscribed before it reads it (as [`run`] does).
fn manager(sim: &SimHandle) -> (Manager, Receiver<Arc<Event>>) {
    let st = sim.state().clone();
    let rx = st.store.subscribe();
    (Manager::new(st), rx)
}

/// Reconciles everything queued without taking in any event.
fn pass_held(m: &mut Manager) {
    let mut pass = std::mem::take(&mut m.queue);
    while !pass.is_empty() {
        let chunk = pass.take(CHUNK);
        m.reconcile(&chunk, &mut pass);
    }
}

/// One iteration of the manager's loop: events taken in before and between chunks, then the
/// scheduler.
fn step(m: &mut Manager, rx: &mut Receiver<Arc<Event>>) {
    assert!(m.drain(rx));
    let mut pass = std::mem::take(&mut m.queue);
    while !pass.is_empty() {
        let chunk = pass.take(CHUNK);
        m.reconcile(&chunk, &mut pass);
        assert!(m.drain(rx));
    }
    schedule(m, rx);
}

/// The end of the loop's iteration: events taken in, pending pods bound.
fn schedule(m: &mut Manager, rx: &mut Receiver<Arc<Event>>) {
    assert!(m.drain(rx));
    for _ in 0..m.sched.active.len().div_ceil(scheduling::BATCH) {
        m.schedule();
        assert!(m.drain(rx));
    }
}

fn pods(sim: &SimHandle) -> Vec<Value> {
    sim.list("v1", "Pod", Some(NS))
}

/// Pods the ReplicaSet controller created (`generateName`).
fn created(sim: &SimHandle) -> usize {
    pods(sim)
        .iter()
        .filter(|p| p.pointer("/metadata/generateName").is_some())
        .count()
}

/// Present and not terminating.
fn alive(sim: &SimHandle, name: &str) -> bool {
    sim.get("v1", "Pod", NS, name).is_some_and(|p| {
        p.pointer("/metadata/deletionTimestamp")
            .is_none_or(Value::is_null)
    })
}

fn evict(sim: &SimHandle, name: &str) {
    let def = crate::resources::by_gvr("", "v1", "pods").expect("pods");
    let opts = DeleteOpts {
        grace_period_seconds: Some(30),
        ..Default::default()
    };
    sim.store()
        .delete(def, NS, name, &opts)
        .expect("graceful delete");
    assert!(!alive(sim, name));
}

fn key(name: &str) -> Key {
    (NS.to_string(), name.to_string())
}

#[tokio::test]
async fn a_sync_before_its_own_create_is_observed_does_not_create_again() {
    let sim = start(web_with_two_pods_on_n1()).await;
    let (mut m, mut rx) = manager(&sim);
    for _ in 0..3 {
        step(&mut m, &mut rx);
    }
    assert_eq!(created(&sim), 0, "a full ReplicaSet creates nothing");

    evict(&sim, "web-1");
    assert!(m.drain(&mut rx));
    pass_held(&mut m);
    assert_eq!(created(&sim), 1, "the evicted pod is replaced");
    // The ReplicaSet is synced again before the replacement's ADDED event is taken in (queued
    // again by some other event): its index still counts one active pod of two.
    m.queue.add(Kind::ReplicaSet, key("web"));
    pass_held(&mut m);
    assert_eq!(
        created(&sim),
        1,
        "no second replacement while the first is unobserved"
    );
    assert!(!m.expectations.satisfied(&key("web"), sim.now()));

    for _ in 0..5 {
        step(&mut m, &mut rx);
    }
    assert!(m.expectations.satisfied(&key("web"), sim.now()));
    assert_eq!(created(&sim), 1, "exactly one replacement");
    assert!(
        alive(&sim, "web-2"),
        "the sibling is not deleted as surplus"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_replica_set_read_ahead_of_the_index_waits_for_its_pods() {
    // n1 takes no new pods (as the tainted node of `tests/run_sim_leader.rs`).
    let mut cordoned = node("n1");
    cordoned["spec"] = json!({"unschedulable": true});
    let sim = start(vec![cordoned]).await;
    let (mut m, mut rx) = manager(&sim);
    // As that test's batches: pods bound to n1, then their ReplicaSet. The manager takes in the
    // first pod (queueing its ReplicaSet, not yet stored) before the second pod and the
    // ReplicaSet are written, and reconciles with those two events still in flight. Without the
    // index check it counted one pod of two and created a pod on n2; the next pass found three
    // and deleted web-2, still Pending on the node with two pods of the set, as surplus.
    sim.apply(new_pod("web", "web-1", "n1")).expect("pod");
    assert!(m.drain(&mut rx));
    sim.apply(new_pod("web", "web-2", "n1")).expect("pod");
    sim.apply(replica_set("web", 2)).expect("replica set");
    pass_held(&mut m);
    assert_eq!(created(&sim), 0, "not synced on an index that lacks web-2");
    schedule(&mut m, &mut rx);

    for _ in 0..5 {
        step(&mut m, &mut rx);
    }
    assert_eq!(created(&sim), 0, "two pods of two: nothing to create");
    assert!(
        alive(&sim, "web-1") && alive(&sim, "web-2"),
        "no pod deleted"
    );
    let rs = sim
        .get("apps/v1", "ReplicaSet", NS, "web")
        .unwrap_or_default();
    assert_eq!(rs.pointer("/status/replicas"), Some(&json!(2)), "{rs}");
    sim.shutdown().await;
}

#[tokio::test]
async fn unobserved_expectations_expire() {
    let sim = start(web_with_two_pods_on_n1()).await;
    let (mut m, mut rx) = manager(&sim);
    step(&mut m, &mut rx);
    m.expectations.timeout = SignedDuration::from_millis(200);
    // A create whose event never comes.
    m.expectations.expect(&key("web"), 1, Vec::new(), sim.now());

    evict(&sim, "web-1");
    step(&mut m, &mut rx);
    assert_eq!(created(&sim), 0, "held by the unobserved create");
    tokio::time::sleep(Duration::from_millis(300)).await;
    m.queue.add(Kind::ReplicaSet, key("web"));
    step(&mut m, &mut rx);
    assert_eq!(created(&sim), 1, "synced once the expectation expired");
    sim.shutdown().await;
}

#[tokio::test]
async fn deleting_a_replica_set_forgets_its_expectations() {
    let sim = start(vec![replica_set("web", 1)]).await;
    let (mut m, mut rx) = manager(&sim);
    pass_held(&mut m);
    assert_eq!(created(&sim), 1);
    assert!(!m.expectations.satisfied(&key("web"), sim.now()));
    let def = crate::resources::by_gvr("apps", "v1", "replicasets").expect("replicasets");
    sim.store()
        .delete(def, NS, "web", &DeleteOpts::default())
        .expect("delete the ReplicaSet");
    // The pod's ADDED event is lost; the ReplicaSet's DELETED event alone clears the record.
    let ev = loop {
        match rx.try_recv() {
            Ok(ev) if ev.gr == ("apps", "replicasets") && ev.kind == EventType::Deleted => {
                break ev;
            }
            Ok(_) => continue,
            Err(e) => panic!("no DELETED event for the ReplicaSet: {e}"),
        }
    };
    m.on_event(&ev);
    assert!(m.expectations.satisfied(&key("web"), sim.now()));
    sim.shutdown().await;
}
