//! ABI v1: the names and numbers a guest module shares with the host, the per-call state the host
//! functions read, and the host functions themselves (import module [`IMPORT_MODULE`]).
//!
//! The guest reads the call's pods without per-pod copies: [`HOST_POD_COLUMN`] fills a whole
//! column (one `i64` per pod) into guest memory with one call, and strings (names, labels, owner
//! kind, states) are copied only for the pods the guest asks about. Nominations are collected
//! here and applied by the adapter after the call returns, so a malformed answer evicts nothing.

use std::sync::{Arc, Mutex};

use wasmtime::{Caller, Extern, Linker, Memory};

use crate::evictor::EvictionReason;
use crate::snapshot::{NodeId, PodId, Snapshot};

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

/// Every host function of ABI v1 (a module importing anything else is refused).
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

/// The pods and nodes one call sees: the pods on the given nodes (in node order, then each node's
/// pod order), then the live pods on no given node (node index -1).
pub struct CallTable {
    /// The call's nodes (index = node index in the ABI).
    pub nodes: Vec<NodeId>,
    /// The table's pods (index = pod index in the ABI).
    pub pods: Vec<PodId>,
    /// Node index of each pod, -1 when on none of the call's nodes.
    pub pod_node: Vec<i32>,
    /// Namespace index of each pod.
    pub pod_namespace: Vec<i32>,
    /// The namespaces (index = namespace index in the ABI).
    pub namespaces: Vec<Arc<str>>,
}

impl CallTable {
    /// A table without nodes or pods (the load-time checks).
    pub fn build_empty() -> Self {
        CallTable {
            nodes: Vec::new(),
            pods: Vec::new(),
            pod_node: Vec::new(),
            pod_namespace: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    /// The table for `nodes` on `snapshot`.
    pub fn build(snapshot: &Snapshot, nodes: &[NodeId]) -> Self {
        let mut index_of = vec![-1i32; snapshot.nodes.len()];
        for (j, n) in nodes.iter().enumerate() {
            if let Some(slot) = index_of.get_mut(*n as usize) {
                *slot = j as i32;
            }
        }
        let mut pods = Vec::with_capacity(snapshot.pods.len());
        let mut pod_node = Vec::with_capacity(snapshot.pods.len());
        for (j, &n) in nodes.iter().enumerate() {
            for p in snapshot.pods_on_node(n) {
                pods.push(p);
                pod_node.push(j as i32);
            }
        }
        for p in snapshot.live_pods() {
            let on_given = snapshot
                .pod(p)
                .node
                .and_then(|n| index_of.get(n as usize))
                .is_some_and(|&j| j >= 0);
            if !on_given {
                pods.push(p);
                pod_node.push(-1);
            }
        }
        let mut namespaces: Vec<Arc<str>> = Vec::new();
        let mut ns_index: rustc_hash::FxHashMap<*const u8, i32> = Default::default();
        let mut pod_namespace = Vec::with_capacity(pods.len());
        for &p in &pods {
            let ns = &snapshot.pod(p).namespace;
            // Pods share their namespace's Arc in most snapshots: look up by pointer first.
            let id = match ns_index.get(&ns.as_ptr()) {
                Some(&id) => id,
                None => {
                    let id = match namespaces.iter().position(|n| n == ns) {
                        Some(i) => i as i32,
                        None => {
                            namespaces.push(ns.clone());
                            (namespaces.len() - 1) as i32
                        }
                    };
                    ns_index.insert(ns.as_ptr(), id);
                    id
                }
            };
            pod_namespace.push(id);
        }
        CallTable {
            nodes: nodes.to_vec(),
            pods,
            pod_node,
            pod_namespace,
            namespaces,
        }
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
    /// The snapshot (None at load time).
    pub snapshot: Option<SnapshotRef>,
    /// The call's table.
    pub table: CallTable,
    /// Nominations so far.
    pub nominations: Vec<Nomination>,
    /// Pod indices nominated (for duplicates).
    pub nominated: Vec<bool>,
    /// The first malformed answer, if any (the call then fails with this text).
    pub malformed: Option<String>,
    /// What the guest gave to `fail`.
    pub failed: Option<String>,
    /// The memory cap and whether it was hit.
    pub limiter: super::sandbox::Limiter,
    /// The plugin's name (the default reason code) and its kept names.
    pub plugin: Arc<str>,
    /// Kept reason codes and keys of this plugin.
    pub interner: Arc<Interner>,
}

impl CallState {
    /// The state for a call over `table`.
    pub fn new(
        snapshot: Option<SnapshotRef>,
        table: CallTable,
        limiter: super::sandbox::Limiter,
        plugin: Arc<str>,
        interner: Arc<Interner>,
    ) -> Self {
        let n = table.pods.len();
        CallState {
            snapshot,
            table,
            nominations: Vec::new(),
            nominated: vec![false; n],
            malformed: None,
            failed: None,
            limiter,
            plugin,
            interner,
        }
    }

    fn pod(&self, index: i32) -> Result<(&Snapshot, PodId), String> {
        let id = usize::try_from(index)
            .ok()
            .and_then(|i| self.table.pods.get(i))
            .ok_or_else(|| {
                format!(
                    "pod index {index} is out of range (the call has {} pods)",
                    self.table.pods.len()
                )
            })?;
        let s = self
            .snapshot
            .as_ref()
            .ok_or("no pods at policy load")?
            .get();
        Ok((s, *id))
    }
}

/// Records `msg` as the call's malformed answer and makes the trap that ends it.
fn malformed(state: &mut CallState, msg: String) -> wasmtime::Error {
    if state.malformed.is_none() {
        state.malformed = Some(msg.clone());
    }
    wasmtime::Error::msg(msg)
}

fn memory(caller: &mut Caller<'_, CallState>) -> Result<Memory, wasmtime::Error> {
    match caller.get_export(EXPORT_MEMORY) {
        Some(Extern::Memory(m)) => Ok(m),
        _ => Err(malformed(
            caller.data_mut(),
            "the module exports no memory".into(),
        )),
    }
}

/// The guest bytes at `ptr..ptr+len`, or a malformed-answer error naming `what`.
fn range(mem_len: usize, ptr: i32, len: i32, what: &str) -> Result<std::ops::Range<usize>, String> {
    let (Ok(p), Ok(l)) = (usize::try_from(ptr), usize::try_from(len)) else {
        return Err(format!("{what}: negative pointer or length ({ptr}, {len})"));
    };
    match p.checked_add(l) {
        Some(end) if end <= mem_len => Ok(p..end),
        _ => Err(format!(
            "{what}: bytes {p}..{} are outside the guest's memory ({mem_len} bytes)",
            p as u64 + l as u64
        )),
    }
}

/// Reads a UTF-8 string of at most `max` bytes from guest memory.
fn read_str(
    caller: &mut Caller<'_, CallState>,
    ptr: i32,
    len: i32,
    max: usize,
    what: &str,
) -> Result<String, wasmtime::Error> {
    if usize::try_from(len).is_ok_and(|l| l > max) {
        return Err(malformed(
            caller.data_mut(),
            format!("{what}: {len} bytes, more than the {max} allowed"),
        ));
    }
    let mem = memory(caller)?;
    let (data, state) = mem.data_and_store_mut(caller);
    let r = match range(data.len(), ptr, len, what) {
        Ok(r) => r,
        Err(e) => return Err(malformed(state, e)),
    };
    match std::str::from_utf8(&data[r]) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(malformed(state, format!("{what}: not UTF-8"))),
    }
}

/// Copies `bytes` (at most `cap` of them) to guest memory at `buf`; returns the full length.
fn write_bytes(
    caller: &mut Caller<'_, CallState>,
    bytes: &[u8],
    buf: i32,
    cap: i32,
    what: &str,
) -> Result<i32, wasmtime::Error> {
    let mem = memory(caller)?;
    let (data, state) = mem.data_and_store_mut(caller);
    let r = range(data.len(), buf, cap, what).map_err(|e| malformed(state, e))?;
    let n = bytes.len().min(r.len());
    data[r.start..r.start + n].copy_from_slice(&bytes[..n]);
    Ok(i32::try_from(bytes.len()).unwrap_or(i32::MAX))
}

/// A string answer about pod `pod`, computed by `f` (None: -1).
fn pod_string(
    caller: &mut Caller<'_, CallState>,
    pod: i32,
    buf: i32,
    cap: i32,
    what: &str,
    f: impl FnOnce(&Snapshot, PodId) -> Option<String>,
) -> Result<i32, wasmtime::Error> {
    let value = {
        let state = caller.data();
        match state.pod(pod) {
            Ok((s, id)) => Ok(f(s, id)),
            Err(e) => Err(e),
        }
    };
    match value {
        Err(e) => Err(malformed(caller.data_mut(), format!("{what}: {e}"))),
        Ok(None) => Ok(-1),
        Ok(Some(v)) => write_bytes(caller, v.as_bytes(), buf, cap, what),
    }
}

/// The value of `column` for pod `id` (node and namespace come from the table).
fn column_value(s: &Snapshot, t: &CallTable, i: usize, id: PodId, column: i32) -> i64 {
    let pod = s.pod(id);
    match column {
        COL_NODE => i64::from(t.pod_node[i]),
        COL_CREATED => pod.creation_timestamp.map_or(i64::MIN, |c| c.as_second()),
        COL_PHASE => match pod.phase {
            crate::snapshot::model::PodPhase::Pending => 0,
            crate::snapshot::model::PodPhase::Running => 1,
            crate::snapshot::model::PodPhase::Succeeded => 2,
            crate::snapshot::model::PodPhase::Failed => 3,
            crate::snapshot::model::PodPhase::Unknown => 4,
        },
        COL_RESTARTS => pod.restarts(false),
        COL_RESTARTS_WITH_INIT => pod.restarts(true),
        COL_NAMESPACE => i64::from(t.pod_namespace[i]),
        COL_CPU_REQUEST => pod.requests.cpu_milli,
        COL_MEMORY_REQUEST => pod.requests.memory,
        _ => i64::from(pod.priority_value()),
    }
}

fn pod_column(
    mut caller: Caller<'_, CallState>,
    column: i32,
    dst: i32,
    count: i32,
) -> Result<i32, wasmtime::Error> {
    if !(COL_NODE..=COL_PRIORITY).contains(&column) {
        return Err(malformed(
            caller.data_mut(),
            format!("pod_column: unknown column {column}"),
        ));
    }
    let n = caller.data().table.pods.len();
    let Some(count) = usize::try_from(count).ok().filter(|&c| c <= n) else {
        return Err(malformed(
            caller.data_mut(),
            format!("pod_column: count {count} is not within 0..={n}"),
        ));
    };
    let mem = memory(&mut caller)?;
    let (data, state) = mem.data_and_store_mut(&mut caller);
    let bytes = i32::try_from(count * 8).unwrap_or(i32::MAX);
    let r = range(data.len(), dst, bytes, "pod_column").map_err(|e| malformed(state, e))?;
    let out = &mut data[r];
    let Some(s) = state.snapshot.as_ref().map(SnapshotRef::get) else {
        return Ok(0);
    };
    let t = &state.table;
    for (i, (chunk, &id)) in out.chunks_exact_mut(8).zip(&t.pods).enumerate() {
        chunk.copy_from_slice(&column_value(s, t, i, id, column).to_le_bytes());
    }
    Ok(count as i32)
}

fn has_state(s: &Snapshot, id: PodId, flags: i32, state: &str) -> bool {
    let pod = s.pod(id);
    if flags & STATE_PHASE != 0 && pod.phase.as_str() == state {
        return true;
    }
    if flags & STATE_POD_REASON != 0 && pod.reason.as_deref() == Some(state) {
        return true;
    }
    let init: &[_] = if flags & STATE_INIT_CONTAINERS != 0 {
        &pod.init_container_states
    } else {
        &[]
    };
    let eph: &[_] = if flags & STATE_EPHEMERAL_CONTAINERS != 0 {
        &pod.ephemeral_container_states
    } else {
        &[]
    };
    pod.container_states.iter().chain(init).chain(eph).any(|c| {
        (flags & STATE_WAITING != 0 && c.waiting_reason.as_deref() == Some(state))
            || (flags & STATE_TERMINATED != 0 && c.terminated_reason.as_deref() == Some(state))
    })
}

fn nominate(
    mut caller: Caller<'_, CallState>,
    pod: i32,
    code_ptr: i32,
    code_len: i32,
    text_ptr: i32,
    text_len: i32,
) -> Result<i32, wasmtime::Error> {
    let code = read_str(&mut caller, code_ptr, code_len, MAX_NAME, "nominate: code")?;
    let text = read_str(
        &mut caller,
        text_ptr,
        text_len,
        MAX_REASON_TEXT,
        "nominate: text",
    )?;
    let state = caller.data_mut();
    let n = state.table.pods.len();
    let Some(index) = usize::try_from(pod).ok().filter(|&i| i < n) else {
        return Err(malformed(
            state,
            format!("nominate: pod index {pod} is out of range (the call has {n} pods)"),
        ));
    };
    if state.nominated[index] {
        return Err(malformed(
            state,
            format!("nominate: pod index {pod} is nominated twice"),
        ));
    }
    if state.table.pod_node[index] < 0 {
        return Err(malformed(
            state,
            format!("nominate: pod index {pod} is on none of the nodes this call was given"),
        ));
    }
    if !code.is_empty() && !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(malformed(
            state,
            format!("nominate: code {code:?} is not UpperCamelCase letters and digits"),
        ));
    }
    let code: std::borrow::Cow<'static, str> = if code.is_empty() {
        state.plugin.to_string().into()
    } else {
        match state.interner.intern(&code) {
            Ok(c) => c.into(),
            Err(e) => return Err(malformed(state, format!("nominate: {e}"))),
        }
    };
    let text = if text.is_empty() {
        state.plugin.to_string()
    } else {
        text
    };
    state.nominated[index] = true;
    state.nominations.push(Nomination {
        index,
        reason: EvictionReason::new(code, text),
    });
    Ok(0)
}

fn reason_number(
    caller: Caller<'_, CallState>,
    key_ptr: i32,
    key_len: i32,
    value: i64,
) -> Result<i32, wasmtime::Error> {
    reason_value(caller, key_ptr, key_len, value.into(), "reason_number")
}

fn reason_flag(
    caller: Caller<'_, CallState>,
    key_ptr: i32,
    key_len: i32,
    value: i32,
) -> Result<i32, wasmtime::Error> {
    reason_value(caller, key_ptr, key_len, (value != 0).into(), "reason_flag")
}

fn reason_value(
    mut caller: Caller<'_, CallState>,
    key_ptr: i32,
    key_len: i32,
    value: crate::evictor::reason::ReasonValue,
    what: &str,
) -> Result<i32, wasmtime::Error> {
    let key = read_str(
        &mut caller,
        key_ptr,
        key_len,
        MAX_NAME,
        &format!("{what}: key"),
    )?;
    let state = caller.data_mut();
    if key.is_empty() {
        return Err(malformed(state, format!("{what}: empty key")));
    }
    let kept = match state.interner.intern(&key) {
        Ok(k) => k,
        Err(e) => return Err(malformed(state, format!("{what}: {e}"))),
    };
    let Some(last) = state.nominations.last_mut() else {
        return Err(malformed(
            state,
            format!("{what}: no nomination to attach it to"),
        ));
    };
    if last.reason.detail.0.len() >= MAX_NUMBERS {
        return Err(malformed(
            state,
            format!("{what}: more than {MAX_NUMBERS} numbers for one nomination"),
        ));
    }
    last.reason.detail.0.push((kept, value));
    Ok(0)
}

fn fail(mut caller: Caller<'_, CallState>, ptr: i32, len: i32) -> Result<(), wasmtime::Error> {
    let mem = memory(&mut caller)?;
    let (data, state) = mem.data_and_store_mut(&mut caller);
    let len = len.clamp(0, MAX_FAIL_MESSAGE as i32);
    let r = range(data.len(), ptr, len, "fail").map_err(|e| malformed(state, e))?;
    let msg = String::from_utf8_lossy(&data[r]).into_owned();
    state.failed = Some(msg.clone());
    Err(wasmtime::Error::msg(format!("the guest failed: {msg}")))
}

/// The linker with every ABI v1 host function.
pub fn linker(engine: &wasmtime::Engine) -> Result<Linker<CallState>, wasmtime::Error> {
    let mut l = Linker::new(engine);
    let m = IMPORT_MODULE;
    l.func_wrap(m, HOST_NODE_COUNT, |c: Caller<'_, CallState>| {
        c.data().table.nodes.len() as i32
    })?;
    l.func_wrap(m, HOST_POD_COUNT, |c: Caller<'_, CallState>| {
        c.data().table.pods.len() as i32
    })?;
    l.func_wrap(m, HOST_NAMESPACE_COUNT, |c: Caller<'_, CallState>| {
        c.data().table.namespaces.len() as i32
    })?;
    l.func_wrap(m, HOST_POD_COLUMN, pod_column)?;
    l.func_wrap(
        m,
        HOST_NAMESPACE_NAME,
        |mut c: Caller<'_, CallState>, ns: i32, buf: i32, cap: i32| {
            let name = usize::try_from(ns)
                .ok()
                .and_then(|i| c.data().table.namespaces.get(i).cloned());
            match name {
                Some(n) => write_bytes(&mut c, n.as_bytes(), buf, cap, "namespace_name"),
                None => Err(malformed(
                    c.data_mut(),
                    format!("namespace_name: unknown namespace index {ns}"),
                )),
            }
        },
    )?;
    l.func_wrap(
        m,
        HOST_NODE_NAME,
        |mut c: Caller<'_, CallState>, node: i32, buf: i32, cap: i32| {
            let name = {
                let st = c.data();
                usize::try_from(node)
                    .ok()
                    .and_then(|i| st.table.nodes.get(i))
                    .zip(st.snapshot.as_ref())
                    .map(|(&n, s)| s.get().node(n).name.clone())
            };
            match name {
                Some(n) => write_bytes(&mut c, n.as_bytes(), buf, cap, "node_name"),
                None => Err(malformed(
                    c.data_mut(),
                    format!("node_name: unknown node index {node}"),
                )),
            }
        },
    )?;
    l.func_wrap(
        m,
        HOST_POD_NAME,
        |mut c: Caller<'_, CallState>, pod: i32, buf: i32, cap: i32| {
            pod_string(&mut c, pod, buf, cap, "pod_name", |s, id| {
                Some(s.pod(id).name.clone())
            })
        },
    )?;
    l.func_wrap(
        m,
        HOST_POD_LABEL,
        |mut c: Caller<'_, CallState>, pod: i32, kp: i32, kl: i32, buf: i32, cap: i32| {
            let key = read_str(&mut c, kp, kl, 317, "pod_label: key")?;
            pod_string(&mut c, pod, buf, cap, "pod_label", |s, id| {
                s.pod(id).labels.get(&key).cloned()
            })
        },
    )?;
    l.func_wrap(
        m,
        HOST_POD_OWNER_KIND,
        |mut c: Caller<'_, CallState>, pod: i32, buf: i32, cap: i32| {
            pod_string(&mut c, pod, buf, cap, "pod_owner_kind", |s, id| {
                s.pod(id).controller().map(|o| o.kind.clone())
            })
        },
    )?;
    l.func_wrap(
        m,
        HOST_POD_HAS_STATE,
        |mut c: Caller<'_, CallState>, pod: i32, flags: i32, sp: i32, sl: i32| {
            let want = read_str(&mut c, sp, sl, MAX_NAME, "pod_has_state: state")?;
            let answer = c
                .data()
                .pod(pod)
                .map(|(s, id)| has_state(s, id, flags, &want));
            match answer {
                Ok(b) => Ok(i32::from(b)),
                Err(e) => Err(malformed(c.data_mut(), format!("pod_has_state: {e}"))),
            }
        },
    )?;
    l.func_wrap(m, HOST_NOMINATE, nominate)?;
    l.func_wrap(m, HOST_REASON_NUMBER, reason_number)?;
    l.func_wrap(m, HOST_REASON_FLAG, reason_flag)?;
    l.func_wrap(m, HOST_FAIL, fail)?;
    Ok(l)
}
