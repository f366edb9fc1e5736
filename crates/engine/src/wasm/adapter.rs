//! The plugin adapter: a loaded [`Guest`] as a Deschedule or Balance plugin. Each run builds the
//! call's table, calls the guest's export in a fresh sandboxed instance, then applies the
//! nominations through the [`Handle`] exactly as a native plugin evicts (the profile's evictor
//! Filter, PreEvictionFilter, limits, the guard verdict, dry-run, Events, metrics). A failed call
//! evicts nothing and fails only this plugin's run for the cycle ([`Handle::fail`]).
//!
//! `plan --explain` asks the optional `kd_explain` export why the plugin would not select a pod
//! ([`WasmPlugin::explanation`]); a failed explain call only says so in the answer's text.

use jiff::Timestamp;

use super::abi::{self, CallTable, Nomination, SnapshotRef};
use super::load::{CallError, Guest};
use crate::framework::{BalancePlugin, DeschedulePlugin, Handle};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// What `plan --explain` says for a pod on none of the nodes the cycle gives the plugin (the host
/// answers without calling the guest: a plugin can only nominate pods on those nodes).
pub const NOT_ON_GIVEN_NODES: &str =
    "its node is not one of the nodes the cycle gives the plugin (the plugin is not asked)";

/// A WebAssembly plugin at its extension point.
pub struct WasmPlugin {
    guest: Guest,
}

impl WasmPlugin {
    /// The plugin for a loaded guest.
    pub fn new(guest: Guest) -> Self {
        WasmPlugin { guest }
    }

    /// How long compiling the module took at policy load.
    pub fn compile_time(&self) -> std::time::Duration {
        self.guest.compile_time
    }

    /// Runs the guest's export over `nodes` and returns the pods it nominated, in its order, with
    /// their reasons; or why the call failed.
    pub fn nominations(
        &self,
        snapshot: &Snapshot,
        nodes: &[NodeId],
        now: Timestamp,
    ) -> Result<Vec<(PodId, crate::evictor::EvictionReason)>, CallError> {
        let table = CallTable::new(nodes);
        let g = &self.guest;
        let (rc, state) = SnapshotRef::scoped(snapshot, |snap| {
            g.invoke(g.entry, Some(snap), table, |store, inst| {
                let entry = inst.get_typed_func::<(i32, i32, i64), i32>(&mut *store, g.entry)?;
                let (ptr, len) = g.write_args(store, inst)?;
                entry.call(&mut *store, (ptr, len, now.as_second()))
            })
        })?;
        if rc != 0 {
            return Err(match state.failed {
                Some(m) => format!("the guest failed: {m}"),
                None => format!("the guest's {} returned {rc}", g.entry),
            });
        }
        let table = state.table;
        state
            .nominations
            .into_iter()
            .map(|Nomination { index, reason }| {
                table
                    .pod_id(Some(snapshot), index)
                    .map(|pod| (pod, reason))
                    .ok_or_else(|| format!("nominated pod index {index} is not in the table"))
            })
            .collect()
    }

    /// Asks the guest's `kd_explain` why it would not select `pod` over `nodes`: `Ok(None)` when
    /// the module has no `kd_explain`, the pod is not in the call's table, or the guest gave no
    /// explanation; the host's own sentence when the pod is on none of `nodes` (the guest is not
    /// called); otherwise the guest's text, or why the call failed.
    pub fn explanation(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        now: Timestamp,
    ) -> Result<Option<String>, CallError> {
        let g = &self.guest;
        if !g.explains {
            return Ok(None);
        }
        let table = CallTable::new(nodes);
        let index = match table.index_of(snapshot, pod) {
            None => return Ok(None),
            Some(None) => return Ok(Some(NOT_ON_GIVEN_NODES.to_string())),
            Some(Some(index)) => index,
        };
        let index = i32::try_from(index).map_err(|_| format!("pod index {index} is too large"))?;
        let (rc, state) = SnapshotRef::scoped(snapshot, |snap| {
            g.invoke(abi::EXPORT_EXPLAIN, Some(snap), table, |store, inst| {
                let f = inst.get_typed_func::<(i32, i32, i64, i32), i32>(
                    &mut *store,
                    abi::EXPORT_EXPLAIN,
                )?;
                let (ptr, len) = g.write_args(store, inst)?;
                f.call(&mut *store, (ptr, len, now.as_second(), index))
            })
        })?;
        if rc != 0 {
            return Err(match state.failed {
                Some(m) => format!("the guest failed: {m}"),
                None => format!("the guest's {} returned {rc}", abi::EXPORT_EXPLAIN),
            });
        }
        Ok(state.explanation)
    }

    /// [`WasmPlugin::explanation`] as `plan --explain` shows it: a failure is a warning in the
    /// text (it never fails the plan).
    fn explain(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        now: Timestamp,
    ) -> Option<String> {
        match self.explanation(snapshot, pod, nodes, now) {
            Ok(e) => e,
            Err(e) => Some(format!(
                "the plugin gives no per-pod explanation (WebAssembly plugin: explain failed: {e})"
            )),
        }
    }

    fn run(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let nominated = match self.nominations(h.snapshot, nodes, h.now) {
            Ok(n) => n,
            Err(e) => {
                h.fail(format!("WebAssembly plugin: {e}"));
                return;
            }
        };
        for (pod, reason) in nominated {
            // The profile's evictor decides as for a native plugin: Filter here, then
            // PreEvictionFilter and the limits in the eviction path.
            if !h.filter(pod) {
                continue;
            }
            match h.evict_because(pod, reason) {
                Err(e) if e.is_total_limit() => return,
                _ => {}
            }
        }
    }
}

impl DeschedulePlugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.guest.plugin
    }

    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        self.run(h, nodes);
    }

    fn explain_pod(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        now: Timestamp,
    ) -> Option<String> {
        self.explain(snapshot, pod, nodes, now)
    }
}

impl BalancePlugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.guest.plugin
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        self.run(h, nodes);
    }

    fn explain_pod(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        now: Timestamp,
    ) -> Option<String> {
        self.explain(snapshot, pod, nodes, now)
    }
}
