//! The controller manager: event-driven, off the request-serving threads.
//!
//! As in kube-controller-manager, controllers do not poll the whole cluster: the store's change
//! stream feeds a work queue keyed by object, each event also queues the objects whose
//! reconcile reads the changed one (a pod queues its ReplicaSet and the PDBs selecting it, a
//! ReplicaSet its Deployment, a node its pods), and a pass reconciles only the queued keys
//! over a [`focus`] state read through the [`Cache`] indexes, then tries the pods in the
//! [`scheduling`] queue against the index's decoded nodes. Objects that still move with time (a pod not yet Ready or terminating, a
//! ReplicaSet or Deployment not at its desired state, a PDB with disrupted pods) are queued
//! again for the next pass. Passes are at least one tick apart (the old loop's pace); with
//! nothing queued the thread sleeps until the next event.
//!
//! The ReplicaSet controller keeps [`Expectations`] across passes, lowered by the pod events
//! this index takes in, as kube-controller-manager's does: the race they close is a sync that
//! runs on an index which has not yet taken in what the store already holds — its own creates,
//! or (the one the leader-election test hit) a ReplicaSet written right after its pods and read
//! from the store before the pods' events were drained. That sync counted one pod of two,
//! created a second "replacement", and the next sync found three active pods and deleted the
//! sibling on the most crowded node as surplus. The expectations also record the last
//! resourceVersion drained, and a ReplicaSet newer than that waits for its own event.
//!
//! It runs on its own OS thread with its own single-threaded runtime, so a large reconcile
//! never takes a request-serving worker.
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::cache::{Cache, Key, Kind, PodEntry, key_of};
use super::focus::{self, Roots};
use super::scheduling::{self, SchedulingQueue};
use crate::SimState;
use crate::controllers::expectations::{self, Expectations};
use crate::controllers::{self, Action, ClusterState};
use crate::resources::by_gvr;
use crate::store::{Event, EventType};

/// Keys reconciled per focused state. The pure controllers compare the objects of a state
/// pairwise (pods × ReplicaSets, pods × PDBs), so the cost of a pass grows with the chunk
/// size; small chunks keep it linear in what is queued and bound the memory of one reconcile.
const CHUNK: usize = 256;

/// Starts the controller manager thread; it ends when the state's shutdown flag is set.
pub fn spawn(st: Arc<SimState>, tick: Duration) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kube-sim-controllers".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("kube-sim controllers cannot start: {e}");
                    return;
                }
            };
            rt.block_on(run(st, tick));
        })
}

struct Manager {
    st: Arc<SimState>,
    cache: Cache,
    /// Keys queued for the next pass.
    queue: Roots,
    /// Pending pods to schedule, and those waiting for a change.
    sched: SchedulingQueue,
    /// The ReplicaSet controller's creation/deletion expectations.
    expectations: Expectations,
}

/// Reads the whole store into the index and queues every object. The rebuilt index holds every
/// write issued so far, so no expectation is outstanding.
fn resync(st: &SimState, cache: &mut Cache, queue: &mut Roots, exp: &mut Expectations) {
    *cache = Cache::default();
    exp.clear();
    // Events after this resourceVersion are in the receiver (it subscribed before).
    exp.observed_through(st.store.current_rv());
    let kinds = [
        (Kind::Node, "", "nodes"),
        (Kind::Pod, "", "pods"),
        (Kind::ReplicaSet, "apps", "replicasets"),
        (Kind::Deployment, "apps", "deployments"),
        (Kind::Pdb, "policy", "poddisruptionbudgets"),
    ];
    for (kind, group, resource) in kinds {
        let Some(def) = by_gvr(group, "v1", resource) else {
            continue;
        };
        // One object at a time: the store lock is never held for the whole resource.
        for (ns, name) in st.store.keys(def) {
            let Some(obj) = st.store.get(def, &ns, &name) else {
                continue;
            };
            let key = (ns, name);
            cache.apply(kind, &key, Some(&obj));
            queue.add(kind, key);
        }
    }
}

impl Manager {
    /// A manager whose cache, queue and expectations are read from the store as it is now
    /// (subscribe to the store's events before, so that none is missed).
    fn new(st: Arc<SimState>) -> Manager {
        let mut m = Manager {
            st: st.clone(),
            cache: Cache::default(),
            queue: Roots::default(),
            sched: SchedulingQueue::default(),
            expectations: Expectations::default(),
        };
        resync(&st, &mut m.cache, &mut m.queue, &mut m.expectations);
        m.sched.reset(&m.cache);
        m
    }

    fn on_event(&mut self, ev: &Event) {
        self.expectations.observed_through(ev.rv);
        let Some(kind) = Kind::of(ev.gr) else {
            return;
        };
        let obj: &Value = &ev.object;
        let key = key_of(obj);
        let now = (ev.kind != EventType::Deleted).then_some(obj);
        let old = self.cache.apply(kind, &key, now);
        self.queue.add(kind, key.clone());
        match kind {
            Kind::Pod => {
                let new = self.cache.pods.get(&key).cloned();
                self.observe_pod(&key, old.as_ref(), new.as_ref(), obj);
                self.sched
                    .on_pod(&key, old.as_ref(), new.as_ref(), &self.cache);
                for e in [old.as_ref(), new.as_ref()].into_iter().flatten() {
                    if let Some(rs) = &e.owner_rs {
                        self.queue
                            .add(Kind::ReplicaSet, (key.0.clone(), rs.clone()));
                    }
                    for p in self.cache.pdbs_selecting(&key.0, &e.labels) {
                        self.queue.add(Kind::Pdb, p);
                    }
                }
            }
            Kind::ReplicaSet => {
                if ev.kind == EventType::Deleted {
                    self.expectations.forget(&key);
                }
                if let Some(Some(d)) = self.cache.replica_sets.get(&key) {
                    self.queue.add(Kind::Deployment, (key.0.clone(), d.clone()));
                }
                self.queue_pdbs_of_rs(&key);
            }
            Kind::Deployment => {
                let rss: Vec<Key> = self
                    .cache
                    .rs_by_owner
                    .get(&key)
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect();
                for rs in rss {
                    self.queue_pdbs_of_rs(&rs);
                }
            }
            Kind::Node => {
                let on_node: Vec<Key> = self
                    .cache
                    .pods_by_node
                    .get(&key.1)
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect();
                for p in on_node {
                    self.queue.add(Kind::Pod, p);
                }
                self.sched.move_all();
            }
            Kind::Pdb => {}
        }
    }

    /// Lowers the ReplicaSet expectations a pod event fulfils: a pod new to the index counts as
    /// a creation for its ReplicaSet, a pod gone or terminating as a deletion (upstream's
    /// `addPod`, `updatePod` and `deletePod` handlers).
    fn observe_pod(
        &mut self,
        key: &Key,
        old: Option<&PodEntry>,
        new: Option<&PodEntry>,
        obj: &Value,
    ) {
        if old.is_none()
            && let Some(rs) = new.and_then(|e| e.owner_rs.as_ref())
        {
            self.expectations
                .creation_observed(&(key.0.clone(), rs.clone()));
        }
        let terminating = obj
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        if new.is_none() || terminating {
            self.expectations.deletion_observed(key);
        }
    }

    /// PDBs selecting any pod of the ReplicaSet (their expected scale reads it).
    fn queue_pdbs_of_rs(&mut self, rs: &Key) {
        let mut seen = std::collections::BTreeSet::new();
        let pods = self.cache.pods_by_owner.get(rs).into_iter().flatten();
        for p in pods {
            if let Some(e) = self.cache.pods.get(p)
                && seen.insert(&e.labels)
            {
                for pdb in self.cache.pdbs_selecting(&rs.0, &e.labels) {
                    self.queue.pdbs.insert(pdb);
                }
            }
        }
    }

    /// Every indexed object (the controllers' configuration changed).
    fn queue_all(&mut self) {
        let c = &self.cache;
        self.queue.nodes.extend(c.nodes.iter().cloned());
        self.queue.pods.extend(c.pods.keys().cloned());
        self.queue
            .replica_sets
            .extend(c.replica_sets.keys().cloned());
        self.queue.deployments.extend(c.deployments.iter().cloned());
        self.queue.pdbs.extend(c.pdbs.keys().cloned());
        self.sched.move_all();
    }

    /// Tries one batch of pending pods; those that get no node wait for a relevant change.
    fn schedule(&mut self) {
        let batch = self.sched.take(scheduling::BATCH);
        if batch.is_empty() {
            return;
        }
        let mut unplaced: std::collections::BTreeSet<Key> = batch.iter().cloned().collect();
        for a in scheduling::schedule(&self.st, &self.cache, &batch) {
            let binding = scheduling::is_binding(&a);
            let target = action_target(&a);
            match super::try_apply_action(&self.st, a) {
                Ok(()) => {
                    if binding && let Some((_, key)) = &target {
                        unplaced.remove(key);
                    }
                }
                Err(e) => {
                    tracing::debug!("scheduler action dropped: {e}");
                    // A stale pod: try it again with what the store holds now.
                    if let Some((_, key)) = target
                        && unplaced.remove(&key)
                        && self.cache.pending.contains(&key)
                    {
                        self.sched.active.insert(key);
                    }
                }
            }
        }
        for key in unplaced {
            if self.cache.pending.contains(&key) && !self.sched.active.contains(&key) {
                self.sched.unschedulable.insert(key);
            }
        }
    }

    /// Reconciles `roots`; queues for the next pass what still moves with time and the
    /// targets of writes that failed.
    ///
    /// Every object of the focused state has been reconciled (each controller goes over all
    /// objects of its kind in the state), so those still waiting in `pass` are dropped from it.
    fn reconcile(&mut self, roots: &Roots, pass: &mut Roots) {
        let state = focus::build(&self.st, &self.cache, roots);
        drop_reconciled(&state, pass);
        let actions = controllers::reconcile_all_with(&state, None, &mut self.expectations);
        for a in actions {
            let target = action_target(&a);
            let pending = expectations::pending_of(&a);
            if let Err(e) = super::try_apply_action(&self.st, a) {
                tracing::debug!("controller action dropped: {e}");
                if let Some(p) = &pending {
                    self.expectations.dropped(p);
                }
                if let Some((kind, key)) = target {
                    self.queue.add(kind, key);
                }
            }
        }
        for p in &state.pods {
            let k = (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            );
            if self.cache.pods.get(&k).is_some_and(|e| e.unsettled) {
                self.queue.pods.insert(k);
            }
        }
        requeue_unsettled(&state, &mut self.queue);
    }

    /// Takes the events that arrived; a lagging receiver rebuilds the index.
    fn drain(&mut self, rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>) -> bool {
        loop {
            match rx.try_recv() {
                Ok(ev) => self.on_event(&ev),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Lagged(n)) => {
                    tracing::debug!("controllers missed {n} events; resyncing");
                    *rx = rx.resubscribe();
                    resync(
                        &self.st,
                        &mut self.cache,
                        &mut self.queue,
                        &mut self.expectations,
                    );
                    self.sched.reset(&self.cache);
                }
                Err(TryRecvError::Closed) => return false,
            }
        }
    }
}

/// Removes the objects of `state` from `pass`.
fn drop_reconciled(state: &ClusterState, pass: &mut Roots) {
    fn key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
        (
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        )
    }
    for p in &state.pods {
        pass.pods.remove(&key(&p.metadata));
    }
    for rs in &state.replica_sets {
        pass.replica_sets.remove(&key(&rs.metadata));
    }
    for d in &state.deployments {
        pass.deployments.remove(&key(&d.metadata));
    }
    for n in &state.nodes {
        pass.nodes.remove(n.metadata.name.as_deref().unwrap_or(""));
    }
}

/// ReplicaSets and Deployments not at their desired state, and PDBs tracking disrupted pods,
/// change with time alone (minReadySeconds, progress deadlines, expiry): queue them again.
fn requeue_unsettled(state: &ClusterState, queue: &mut Roots) {
    let key = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        (
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        )
    };
    for rs in &state.replica_sets {
        let want = rs.spec.replicas.unwrap_or(1);
        let settled = rs.status.as_ref().is_some_and(|s| {
            s.replicas == want
                && s.ready_replicas.unwrap_or(0) == want
                && s.available_replicas.unwrap_or(0) == want
                && s.observed_generation == rs.metadata.generation
        });
        if !settled {
            queue.replica_sets.insert(key(&rs.metadata));
        }
    }
    for d in &state.deployments {
        let want = d.spec.replicas.unwrap_or(1);
        let settled = d.status.as_ref().is_some_and(|s| {
            s.replicas.unwrap_or(0) == want
                && s.updated_replicas.unwrap_or(0) == want
                && s.ready_replicas.unwrap_or(0) == want
                && s.available_replicas.unwrap_or(0) == want
                && s.observed_generation == d.metadata.generation
        });
        if !settled {
            queue.deployments.insert(key(&d.metadata));
        }
    }
    for p in &state.pdbs {
        if p.status
            .as_ref()
            .and_then(|s| s.disrupted_pods.as_ref())
            .is_some_and(|d| !d.is_empty())
        {
            queue.pdbs.insert(key(&p.metadata));
        }
    }
}

/// The queue key of the object an action writes (for a create: its controlling owner).
fn action_target(a: &Action) -> Option<(Kind, Key)> {
    let kind_of = |k: &str| match k {
        "Pod" => Some(Kind::Pod),
        "Node" => Some(Kind::Node),
        "ReplicaSet" => Some(Kind::ReplicaSet),
        "Deployment" => Some(Kind::Deployment),
        "PodDisruptionBudget" => Some(Kind::Pdb),
        _ => None,
    };
    match a {
        Action::Update(v) => Some((kind_of(v.get("kind")?.as_str()?)?, key_of(v))),
        Action::Delete {
            kind,
            namespace,
            name,
            ..
        } => Some((
            kind_of(kind)?,
            (namespace.clone().unwrap_or_default(), name.clone()),
        )),
        Action::Create(v) => {
            let owner = v
                .pointer("/metadata/ownerReferences")?
                .as_array()?
                .iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
            let ns = v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some((
                kind_of(owner.get("kind")?.as_str()?)?,
                (ns, owner.get("name")?.as_str()?.to_string()),
            ))
        }
    }
}

async fn run(st: Arc<SimState>, tick: Duration) {
    let mut rx = st.store.subscribe();
    let mut shutdown = st.shutdown_rx();
    let mut config = st.config_rx();
    let mut m = Manager::new(st.clone());
    loop {
        if *shutdown.borrow() || !m.drain(&mut rx) {
            return;
        }
        if config.has_changed().unwrap_or(false) {
            let _ = config.borrow_and_update();
            m.queue_all();
        }
        if m.queue.is_empty() && m.sched.active.is_empty() {
            tokio::select! {
                r = rx.recv() => match r {
                    Ok(ev) => m.on_event(&ev),
                    Err(RecvError::Lagged(_)) => {
                        rx = rx.resubscribe();
                        resync(&st, &mut m.cache, &mut m.queue, &mut m.expectations);
                        m.sched.reset(&m.cache);
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = shutdown.changed() => {}
                _ = config.changed() => m.queue_all(),
            }
            continue;
        }
        // One pass over everything queued, in chunks, taking events between chunks (they
        // queue keys for the next pass).
        let pass_start = Instant::now();
        let mut pass = std::mem::take(&mut m.queue);
        while !pass.is_empty() {
            let chunk = pass.take(CHUNK);
            m.reconcile(&chunk, &mut pass);
            if *shutdown.borrow() || !m.drain(&mut rx) {
                return;
            }
        }
        // Then the pods waiting for the scheduler, a batch at a time (those queued again by a
        // failed write wait for the next pass).
        for _ in 0..m.sched.active.len().div_ceil(scheduling::BATCH) {
            m.schedule();
            if *shutdown.borrow() || !m.drain(&mut rx) {
                return;
            }
        }
        let rest = tick.saturating_sub(pass_start.elapsed());
        if !rest.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(rest) => {}
                _ = shutdown.changed() => {}
            }
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
