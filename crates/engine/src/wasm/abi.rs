//! ABI v1: the names and numbers a guest module shares with the host, and the per-call state the
//! host functions ([`super::host`]) read and fill.
//!
//! The guest reads the call's pods without per-pod copies: [`HOST_POD_COLUMN`] fills a whole
//! column (one `i64` per pod) into guest memory with one call, and strings (names, labels, owner
//! kind, states) are copied only for the pods the guest asks about. Nominations are collected
//! here and applied by the adapter after the call returns, so a malformed answer evicts nothing.

use std::sync::{Arc, Mutex};

pub use super::table::{CallTable, FullTable};
use crate::evictor::EvictionReason;
use crate::snapshot::{PodId, Snapshot};

/// The ABI version this host speaks; the guest's `kd_abi_version` export must return it.
pub const ABI_VERSION: i32 = 1;
/// The one import module a guest may import from.
pub const IMPORT_MODULE: &str = "kube_descheduler";
/// Export: `() -> i32`, the guest's ABI version.
pub const EXPORT_VERSION: &str = "kd_abi_version";
/// Export: `(size: i32) -> i32`, a pointer to `size` writable bytes (the host writes `args` there).
pub const EXPORT_ALLOC: &str = "kd_alloc";
/// Optional export: `(args_ptr: i32, args_len: i32) -> i32`, called once at policy load; non-zero
/// refuses the args (a configuration error, with the text the guest gave to `fail`).
pub const EXPORT_VALIDATE: &str = "kd_validate";
/// Export for the Deschedule extension point: `(args_ptr, args_len: i32, now: i64) -> i32`.
pub const EXPORT_DESCHEDULE: &str = "deschedule";
/// Export for the Balance extension point (same signature as `deschedule`).
pub const EXPORT_BALANCE: &str = "balance";
/// Optional export: `(args_ptr, args_len: i32, now: i64, pod: i32) -> i32`, called only by
/// `plan --explain`: why the plugin would not select table pod `pod` (given to [`HOST_EXPLAIN`]).
pub const EXPORT_EXPLAIN: &str = "kd_explain";
/// The guest's linear memory.
pub const EXPORT_MEMORY: &str = "memory";

/// Host function `() -> i32`: nodes given to this call.
pub const HOST_NODE_COUNT: &str = "node_count";
/// Host function `() -> i32`: pods in this call's table.
pub const HOST_POD_COUNT: &str = "pod_count";
/// Host function `() -> i32`: distinct namespaces of the table's pods.
pub const HOST_NAMESPACE_COUNT: &str = "namespace_count";
/// Host function `(column, dst, count: i32) -> i32`: writes `count` little-endian `i64`s.
pub const HOST_POD_COLUMN: &str = "pod_column";
/// Host function `(ns, buf, cap: i32) -> i32`: a namespace's name.
pub const HOST_NAMESPACE_NAME: &str = "namespace_name";
/// Host function `(node, buf, cap: i32) -> i32`: a node's name.
pub const HOST_NODE_NAME: &str = "node_name";
/// Host function `(pod, buf, cap: i32) -> i32`: a pod's name.
pub const HOST_POD_NAME: &str = "pod_name";
/// Host function `(pod, key_ptr, key_len, buf, cap: i32) -> i32`: a label's value (-1: absent).
pub const HOST_POD_LABEL: &str = "pod_label";
/// Host function `(pod, buf, cap: i32) -> i32`: the controller owner's kind (-1: none).
pub const HOST_POD_OWNER_KIND: &str = "pod_owner_kind";
/// Host function `(pod, flags, str_ptr, str_len: i32) -> i32`: 1 when one of the pod's states
/// selected by `flags` ([`STATE_PHASE`] …) equals the string.
pub const HOST_POD_HAS_STATE: &str = "pod_has_state";
/// Host function `(pod, code_ptr, code_len, text_ptr, text_len: i32) -> i32`: nominates a pod.
pub const HOST_NOMINATE: &str = "nominate";
/// Host function `(key_ptr, key_len: i32, value: i64) -> i32`: a number for the last nomination.
pub const HOST_REASON_NUMBER: &str = "reason_number";
/// Host function `(key_ptr, key_len, value: i32) -> i32`: a yes/no fact for the last nomination.
pub const HOST_REASON_FLAG: &str = "reason_flag";
/// Host function `(msg_ptr, msg_len: i32)`: the guest gives up with this message.
pub const HOST_FAIL: &str = "fail";
/// Host function `(text_ptr, text_len: i32) -> i32`: the answer of `kd_explain` (only there; a
/// second call replaces the first, an empty text means no explanation).
pub const HOST_EXPLAIN: &str = "explain";

/// Host function `(node, buf, cap: i32) -> i32` (v1.1): the node's taints as a JSON array
/// ([`super::facts`]).
pub const HOST_NODE_TAINTS: &str = "node_taints";
/// Host function `(pod, buf, cap: i32) -> i32` (v1.1): the pod's tolerations as a JSON array.
pub const HOST_POD_TOLERATIONS: &str = "pod_tolerations";
/// Host function `(pod, buf, cap: i32) -> i32` (v1.1): the pod's conditions as a JSON array.
pub const HOST_POD_CONDITIONS: &str = "pod_conditions";
/// Host function `(pod, buf, cap: i32) -> i32` (v1.1): the pod's container statuses as a JSON
/// array.
pub const HOST_POD_CONTAINERS: &str = "pod_containers";
/// Host function `(pod, buf, cap: i32) -> i32` (v1.1): the pod's owner references as a JSON array.
pub const HOST_POD_OWNERS: &str = "pod_owners";
/// Host function `(key_ptr, key_len, value_ptr, value_len: i32) -> i32` (v1.1): a string fact for
/// the last nomination.
pub const HOST_REASON_STRING: &str = "reason_string";

/// Host function `(node: i32) -> i32` (v1.1): how many pods of node index `node` the table holds.
pub const HOST_NODE_POD_COUNT: &str = "node_pod_count";
/// Host function `(node: i32) -> i32` (v1.1): the table index of the node's first pod (its pods
/// are the indexes `offset..offset + node_pod_count(node)`).
pub const HOST_NODE_POD_OFFSET: &str = "node_pod_offset";
/// Host function `(node, column, dst, count: i32) -> i32` (v1.1): like `pod_column`, for the
/// first `count` pods of one node.
pub const HOST_NODE_POD_COLUMN: &str = "node_pod_column";
/// Host function `(pod, buf, cap: i32) -> i32` (v1.1): the pod's namespace.
pub const HOST_POD_NAMESPACE: &str = "pod_namespace";

/// Every host function of ABI v1 and its additive revision v1.1 (a module importing anything else
/// is refused; a module importing none of v1.1's loads as before).
pub const HOST_FUNCTIONS: &[&str] = &[
    HOST_NODE_COUNT,
    HOST_POD_COUNT,
    HOST_NAMESPACE_COUNT,
    HOST_POD_COLUMN,
    HOST_NAMESPACE_NAME,
    HOST_NODE_NAME,
    HOST_POD_NAME,
    HOST_POD_LABEL,
    HOST_POD_OWNER_KIND,
    HOST_POD_HAS_STATE,
    HOST_NOMINATE,
    HOST_REASON_NUMBER,
    HOST_REASON_FLAG,
    HOST_FAIL,
    HOST_EXPLAIN,
    HOST_NODE_TAINTS,
    HOST_POD_TOLERATIONS,
    HOST_POD_CONDITIONS,
    HOST_POD_CONTAINERS,
    HOST_POD_OWNERS,
    HOST_REASON_STRING,
    HOST_NODE_POD_COUNT,
    HOST_NODE_POD_OFFSET,
    HOST_NODE_POD_COLUMN,
    HOST_POD_NAMESPACE,
];

/// Column: the pod's node as an index into the call's nodes, -1 when it is on none of them.
pub const COL_NODE: i32 = 0;
/// Column: creation time, Unix seconds ([`i64::MIN`] when unknown).
pub const COL_CREATED: i32 = 1;
/// Column: phase (0 Pending, 1 Running, 2 Succeeded, 3 Failed, 4 Unknown).
pub const COL_PHASE: i32 = 2;
/// Column: restarts of the app containers.
pub const COL_RESTARTS: i32 = 3;
/// Column: restarts of the app and init containers.
pub const COL_RESTARTS_WITH_INIT: i32 = 4;
/// Column: the namespace as an index into the call's namespaces.
pub const COL_NAMESPACE: i32 = 5;
/// Column: requested CPU in millicores.
pub const COL_CPU_REQUEST: i32 = 6;
/// Column: requested memory in bytes.
pub const COL_MEMORY_REQUEST: i32 = 7;
/// Column: priority (0 when unset).
pub const COL_PRIORITY: i32 = 8;

/// `pod_has_state` flag: the pod's phase (`Running`, `Pending`, …).
pub const STATE_PHASE: i32 = 1;
/// `pod_has_state` flag: the pod's status reason (`NodeLost`, `Evicted`, …).
pub const STATE_POD_REASON: i32 = 2;
/// `pod_has_state` flag: the containers' waiting reasons (`CrashLoopBackOff`, …).
pub const STATE_WAITING: i32 = 4;
/// `pod_has_state` flag: the containers' terminated reasons (`OOMKilled`, …).
pub const STATE_TERMINATED: i32 = 8;
/// `pod_has_state` flag: look at init containers too.
pub const STATE_INIT_CONTAINERS: i32 = 16;
/// `pod_has_state` flag: look at ephemeral containers too.
pub const STATE_EPHEMERAL_CONTAINERS: i32 = 32;

/// Longest reason text a guest may give, in bytes.
pub const MAX_REASON_TEXT: usize = 1024;
/// Longest reason code or number key, in bytes.
pub const MAX_NAME: usize = 64;
/// Most numbers one nomination may carry.
pub const MAX_NUMBERS: usize = 8;
/// Most distinct reason codes and number keys one plugin may ever use (they are kept for the
/// process's life, so a guest cannot grow the host's memory without bound).
pub const MAX_INTERNED: usize = 64;
/// Longest `fail` message kept, in bytes (longer ones are cut).
pub const MAX_FAIL_MESSAGE: usize = 4096;

/// The reason codes and number keys a plugin used, kept for the process's life (reasons hold
/// `&'static str` codes and keys). Bounded by [`MAX_INTERNED`].
#[derive(Default)]
pub struct Interner {
    names: Mutex<Vec<&'static str>>,
}

impl Interner {
    /// The kept copy of `s`, or an error when the plugin already used [`MAX_INTERNED`] names.
    pub fn intern(&self, s: &str) -> Result<&'static str, String> {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = names.iter().find(|k| **k == s) {
            return Ok(*k);
        }
        if names.len() >= MAX_INTERNED {
            return Err(format!(
                "more than {MAX_INTERNED} distinct reason codes and number keys"
            ));
        }
        let kept: &'static str = Box::leak(s.to_string().into_boxed_str());
        names.push(kept);
        Ok(kept)
    }
}

/// One nomination as the guest gave it (validated when given).
pub struct Nomination {
    /// The pod's index in the call table.
    pub index: usize,
    /// The reason.
    pub reason: EvictionReason,
}

/// A pointer to the cycle's snapshot that lives only while one call runs.
///
/// wasmtime's `Store<T>` needs `T: 'static`, so the host functions cannot hold `&Snapshot`.
/// [`SnapshotRef::scoped`] is the only constructor: it hands the pointer to a closure, and the
/// adapter creates and drops the store inside that closure.
pub struct SnapshotRef(*const Snapshot);

impl SnapshotRef {
    /// Runs `f` with a reference to `snapshot` that `f` must not let outlive the call.
    pub fn scoped<R>(snapshot: &Snapshot, f: impl FnOnce(SnapshotRef) -> R) -> R {
        f(SnapshotRef(snapshot as *const Snapshot))
    }

    /// The snapshot.
    pub fn get(&self) -> &Snapshot {
        // SAFETY: built only by `scoped` from a live `&Snapshot`; the store holding this value is
        // created and dropped inside the `scoped` closure, so the snapshot outlives every use.
        unsafe { &*self.0 }
    }
}

/// The store's data for one call (or for the load-time checks, with an empty table).
pub struct CallState {
    /// The export this call runs (`deschedule`, `kd_explain`, `kd_validate`, …): some host
    /// functions answer only inside one of them.
    pub export: &'static str,
    /// The snapshot (None at load time).
    pub snapshot: Option<SnapshotRef>,
    /// The call's table.
    pub table: CallTable,
    /// Nominations so far.
    pub nominations: Vec<Nomination>,
    /// Pod indices nominated (for duplicates).
    pub nominated: rustc_hash::FxHashSet<usize>,
    /// The first malformed answer, if any (the call then fails with this text).
    pub malformed: Option<String>,
    /// What the guest gave to `fail`.
    pub failed: Option<String>,
    /// The last text `kd_explain` gave to [`HOST_EXPLAIN`] (None: no explanation).
    pub explanation: Option<String>,
    /// The memory cap and whether it was hit.
    pub limiter: super::sandbox::Limiter,
    /// The plugin's name (the default reason code) and its kept names.
    pub plugin: Arc<str>,
    /// Kept reason codes and keys of this plugin.
    pub interner: Arc<Interner>,
    /// The instance's exported memory, once instantiated (host functions use it rather than
    /// looking the export up by name on every call).
    pub memory: Option<wasmtime::Memory>,
}

impl CallState {
    /// The state for a call of `export` over `table`.
    pub fn new(
        export: &'static str,
        snapshot: Option<SnapshotRef>,
        table: CallTable,
        limiter: super::sandbox::Limiter,
        plugin: Arc<str>,
        interner: Arc<Interner>,
    ) -> Self {
        CallState {
            export,
            snapshot,
            table,
            nominations: Vec::new(),
            nominated: Default::default(),
            malformed: None,
            failed: None,
            explanation: None,
            limiter,
            plugin,
            interner,
            memory: None,
        }
    }

    /// The call's snapshot (None at policy load).
    pub fn snap(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref().map(SnapshotRef::get)
    }

    /// The whole table (built on first use).
    pub fn full(&self) -> &FullTable {
        self.table.full(self.snap())
    }

    /// The snapshot and pod id of table index `index`, or why there is none.
    pub(super) fn pod(&self, index: i32) -> Result<(&Snapshot, PodId), String> {
        let s = self.snap();
        let id = usize::try_from(index)
            .ok()
            .and_then(|i| self.table.pod_id(s, i));
        match (s, id) {
            (Some(s), Some(id)) => Ok((s, id)),
            _ => Err(format!(
                "pod index {index} is out of range (the call has {} pods)",
                self.full().pods.len()
            )),
        }
    }
}
