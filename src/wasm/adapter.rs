//! The plugin adapter: a loaded [`Guest`] as a Deschedule or Balance plugin. Each run builds the
//! call's table, calls the guest's export in a fresh sandboxed instance, then applies the
//! nominations through the [`Handle`] exactly as a native plugin evicts (the profile's evictor
//! Filter, PreEvictionFilter, limits, the guard verdict, dry-run, Events, metrics). A failed call
//! evicts nothing and fails only this plugin's run for the cycle ([`Handle::fail`]).

use jiff::Timestamp;

use super::abi::{CallTable, Nomination, SnapshotRef};
use super::load::{CallError, Guest};
use crate::framework::{BalancePlugin, DeschedulePlugin, Handle};
use crate::snapshot::{NodeId, PodId, Snapshot};

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
        let table = CallTable::build(snapshot, nodes);
        let g = &self.guest;
        let (rc, state) = SnapshotRef::scoped(snapshot, |snap| {
            g.invoke(Some(snap), table, |store, inst| {
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
        let pods = state.table.pods;
        Ok(state
            .nominations
            .into_iter()
            .map(|Nomination { index, reason }| (pods[index], reason))
            .collect())
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
}

impl BalancePlugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.guest.plugin
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        self.run(h, nodes);
    }
}
