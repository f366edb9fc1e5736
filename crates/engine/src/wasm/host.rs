//! ABI v1's host functions (import module [`IMPORT_MODULE`]): what a guest may ask about the
//! call's pods and nodes, and how it answers (nominations with their reasons, an explanation,
//! `fail`). Every malformed request or answer ends the call with a sentence saying what was wrong.

use wasmtime::{Caller, Extern, Linker, Memory};

use super::abi::*;
use crate::evictor::EvictionReason;
use crate::snapshot::{NodeId, PodId, Snapshot};

/// Records `msg` as the call's malformed answer and makes the trap that ends it.
pub(super) fn malformed(state: &mut CallState, msg: String) -> wasmtime::Error {
    if state.malformed.is_none() {
        state.malformed = Some(msg.clone());
    }
    wasmtime::Error::msg(msg)
}

pub(super) fn memory(caller: &mut Caller<'_, CallState>) -> Result<Memory, wasmtime::Error> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    match caller.get_export(EXPORT_MEMORY) {
        Some(Extern::Memory(m)) => Ok(m),
        _ => Err(malformed(
            caller.data_mut(),
            "the module exports no memory".into(),
        )),
    }
}

/// The node index `node` as a `usize` when the call has that node, else a malformed answer
/// naming `what`.
pub(super) fn node_index(
    c: &mut Caller<'_, CallState>,
    node: i32,
    what: &str,
) -> Result<usize, wasmtime::Error> {
    match usize::try_from(node)
        .ok()
        .filter(|&j| j < c.data().table.nodes.len())
    {
        Some(j) => Ok(j),
        None => Err(unknown_node(c, node, what)),
    }
}

/// `f` of the snapshot and the node at index `node` of the call, else a malformed answer naming
/// `what`.
pub(super) fn with_node<T>(
    c: &mut Caller<'_, CallState>,
    node: i32,
    what: &str,
    f: impl FnOnce(&Snapshot, NodeId) -> T,
) -> Result<T, wasmtime::Error> {
    let j = node_index(c, node, what)?;
    let out = {
        let st = c.data();
        st.snap().zip(st.table.nodes.get(j)).map(|(s, &n)| f(s, n))
    };
    out.ok_or_else(|| unknown_node(c, node, what))
}

fn unknown_node(c: &mut Caller<'_, CallState>, node: i32, what: &str) -> wasmtime::Error {
    malformed(c.data_mut(), format!("{what}: unknown node index {node}"))
}

/// The guest bytes at `ptr..ptr+len`, or a malformed-answer error naming `what`.
fn range(
    mem_len: usize,
    ptr: i32,
    len: i32,
    what: impl std::fmt::Display,
) -> Result<std::ops::Range<usize>, String> {
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

/// The UTF-8 string of at most `max` bytes at `ptr..ptr+len` of the guest memory `data`, or a
/// sentence naming `what`.
fn guest_str(
    data: &[u8],
    ptr: i32,
    len: i32,
    max: usize,
    what: impl std::fmt::Display,
) -> Result<&str, String> {
    if usize::try_from(len).is_ok_and(|l| l > max) {
        return Err(format!("{what}: {len} bytes, more than the {max} allowed"));
    }
    let r = range(data.len(), ptr, len, &what)?;
    std::str::from_utf8(&data[r]).map_err(|_| format!("{what}: not UTF-8"))
}

/// Runs `f` with a UTF-8 string of at most `max` bytes read from guest memory (no copy) and the
/// call's state; a bad string is a malformed answer naming `what`.
fn with_str<R>(
    caller: &mut Caller<'_, CallState>,
    ptr: i32,
    len: i32,
    max: usize,
    what: impl std::fmt::Display,
    f: impl FnOnce(&str, &mut CallState) -> Result<R, wasmtime::Error>,
) -> Result<R, wasmtime::Error> {
    let mem = memory(caller)?;
    let (data, state) = mem.data_and_store_mut(caller);
    match guest_str(data, ptr, len, max, what) {
        Ok(s) => f(s, state),
        Err(e) => Err(malformed(state, e)),
    }
}

/// Reads a UTF-8 string of at most `max` bytes from guest memory.
pub(super) fn read_str(
    caller: &mut Caller<'_, CallState>,
    ptr: i32,
    len: i32,
    max: usize,
    what: impl std::fmt::Display,
) -> Result<String, wasmtime::Error> {
    with_str(caller, ptr, len, max, what, |s, _| Ok(s.to_string()))
}

/// Copies `bytes` (at most `cap` of them) to guest memory at `buf`; returns the full length.
pub(super) fn write_bytes(
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
pub(super) fn pod_string(
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

/// The value of `column` for pod `id`, for the columns read from the pod (not NODE and
/// NAMESPACE, which come from the table).
pub(super) fn column_value(s: &Snapshot, id: PodId, column: i32) -> i64 {
    let pod = s.pod(id);
    match column {
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
        COL_CPU_REQUEST => pod.requests.cpu_milli,
        COL_MEMORY_REQUEST => pod.requests.memory,
        _ => i64::from(pod.priority_value()),
    }
}

/// The guest bytes for `count` `i64`s at `dst` of a column request `what` (`count` must be
/// within `0..=n`, `column` a known column); a bad request is a malformed answer.
pub(super) fn column_dst<'a>(
    data: &'a mut [u8],
    state: &mut CallState,
    what: &str,
    column: i32,
    dst: i32,
    count: i32,
    n: usize,
) -> Result<(&'a mut [u8], usize), wasmtime::Error> {
    if !(COL_NODE..=COL_PRIORITY).contains(&column) {
        return Err(malformed(state, format!("{what}: unknown column {column}")));
    }
    let Some(count) = usize::try_from(count).ok().filter(|&c| c <= n) else {
        return Err(malformed(
            state,
            format!("{what}: count {count} is not within 0..={n}"),
        ));
    };
    let bytes = i32::try_from(count * 8).unwrap_or(i32::MAX);
    let r = range(data.len(), dst, bytes, what).map_err(|e| malformed(state, e))?;
    Ok((&mut data[r], count))
}

/// Writes `values` as little-endian `i64`s into `out` (as many as fit).
pub(super) fn put_i64s(out: &mut [u8], values: impl Iterator<Item = i64>) {
    for (chunk, v) in out.chunks_exact_mut(8).zip(values) {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
}

fn pod_column(
    mut caller: Caller<'_, CallState>,
    column: i32,
    dst: i32,
    count: i32,
) -> Result<i32, wasmtime::Error> {
    let n = caller.data().full().pods.len();
    let mem = memory(&mut caller)?;
    let (data, state) = mem.data_and_store_mut(&mut caller);
    let (out, count) = column_dst(data, state, HOST_POD_COLUMN, column, dst, count, n)?;
    let Some(s) = state.snap() else {
        return Ok(0);
    };
    let t = state.full();
    match column {
        // From the table: no pod is read.
        COL_NODE => put_i64s(out, t.pod_node.iter().map(|&v| i64::from(v))),
        COL_NAMESPACE => put_i64s(out, t.pod_namespace.iter().map(|&v| i64::from(v))),
        _ => put_i64s(
            out,
            s.prefetched(&t.pods).map(|id| column_value(s, id, column)),
        ),
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
    // The code's bytes are checked here and read again (without a copy) once the pod is.
    with_str(
        &mut caller,
        code_ptr,
        code_len,
        MAX_NAME,
        "nominate: code",
        |_, _| Ok(()),
    )?;
    let text = read_str(
        &mut caller,
        text_ptr,
        text_len,
        MAX_REASON_TEXT,
        "nominate: text",
    )?;
    let index = nominated_index(caller.data_mut(), pod)?;
    let code = with_str(
        &mut caller,
        code_ptr,
        code_len,
        MAX_NAME,
        "nominate: code",
        |code, state| nomination_code(state, code),
    )?;
    let state = caller.data_mut();
    let text = if text.is_empty() {
        state.plugin.to_string()
    } else {
        text
    };
    state.nominated.insert(index);
    state.nominations.push(Nomination {
        index,
        reason: EvictionReason::new(code, text),
    });
    Ok(0)
}

/// The table index of a pod `nominate` may nominate: in range, not yet nominated, on one of the
/// call's nodes, and not from `kd_explain`.
fn nominated_index(state: &mut CallState, pod: i32) -> Result<usize, wasmtime::Error> {
    if state.export == EXPORT_EXPLAIN {
        return Err(malformed(
            state,
            "nominate: called from kd_explain (an explanation must not nominate)".into(),
        ));
    }
    // A pod on a given node is checked without the whole table; any other index is malformed,
    // and the whole table only serves to say how.
    let on_given = state.table.on_given_nodes(state.snap());
    let Some(index) = usize::try_from(pod).ok().filter(|&i| i < on_given) else {
        let n = state.full().pods.len();
        let msg = if usize::try_from(pod).is_ok_and(|i| i < n) {
            format!("nominate: pod index {pod} is on none of the nodes this call was given")
        } else {
            format!("nominate: pod index {pod} is out of range (the call has {n} pods)")
        };
        return Err(malformed(state, msg));
    };
    if state.nominated.contains(&index) {
        return Err(malformed(
            state,
            format!("nominate: pod index {pod} is nominated twice"),
        ));
    }
    Ok(index)
}

/// A nomination's reason code: the plugin's name when empty, else the kept copy of `code`
/// (UpperCamelCase letters and digits).
fn nomination_code(
    state: &mut CallState,
    code: &str,
) -> Result<std::borrow::Cow<'static, str>, wasmtime::Error> {
    if code.is_empty() {
        return Ok(state.plugin.to_string().into());
    }
    if !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(malformed(
            state,
            format!("nominate: code {code:?} is not UpperCamelCase letters and digits"),
        ));
    }
    match state.interner.intern(code) {
        Ok(c) => Ok(c.into()),
        Err(e) => Err(malformed(state, format!("nominate: {e}"))),
    }
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

pub(super) fn reason_value(
    mut caller: Caller<'_, CallState>,
    key_ptr: i32,
    key_len: i32,
    value: crate::evictor::reason::ReasonValue,
    what: &str,
) -> Result<i32, wasmtime::Error> {
    let kept = with_str(
        &mut caller,
        key_ptr,
        key_len,
        MAX_NAME,
        format_args!("{what}: key"),
        |key, state| {
            if key.is_empty() {
                return Err(malformed(state, format!("{what}: empty key")));
            }
            state
                .interner
                .intern(key)
                .map_err(|e| malformed(state, format!("{what}: {e}")))
        },
    )?;
    let state = caller.data_mut();
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

/// `explain`: the answer of `kd_explain`. Only that export may call it; a later call replaces an
/// earlier one, and an empty text means no explanation.
fn explain(mut caller: Caller<'_, CallState>, ptr: i32, len: i32) -> Result<i32, wasmtime::Error> {
    let export = caller.data().export;
    if export != EXPORT_EXPLAIN {
        return Err(malformed(
            caller.data_mut(),
            format!(
                "explain: called from {export} (only {EXPORT_EXPLAIN} may give an explanation)"
            ),
        ));
    }
    let text = read_str(&mut caller, ptr, len, MAX_REASON_TEXT, "explain: text")?;
    caller.data_mut().explanation = (!text.is_empty()).then_some(text);
    Ok(0)
}

fn namespace_name(
    mut c: Caller<'_, CallState>,
    ns: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    let name = usize::try_from(ns)
        .ok()
        .and_then(|i| c.data().full().namespaces.get(i).cloned());
    match name {
        Some(n) => write_bytes(&mut c, n.as_bytes(), buf, cap, "namespace_name"),
        None => Err(malformed(
            c.data_mut(),
            format!("namespace_name: unknown namespace index {ns}"),
        )),
    }
}

fn node_name(
    mut c: Caller<'_, CallState>,
    node: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    let name = with_node(&mut c, node, HOST_NODE_NAME, |s, n| s.node(n).name.clone())?;
    write_bytes(&mut c, name.as_bytes(), buf, cap, HOST_NODE_NAME)
}

fn pod_name(
    mut c: Caller<'_, CallState>,
    pod: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    pod_string(&mut c, pod, buf, cap, "pod_name", |s, id| {
        Some(s.pod(id).name.clone())
    })
}

fn pod_label(
    mut c: Caller<'_, CallState>,
    pod: i32,
    key_ptr: i32,
    key_len: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    let key = read_str(&mut c, key_ptr, key_len, 317, "pod_label: key")?;
    pod_string(&mut c, pod, buf, cap, "pod_label", |s, id| {
        s.pod(id).labels.get(&key).cloned()
    })
}

fn pod_owner_kind(
    mut c: Caller<'_, CallState>,
    pod: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    pod_string(&mut c, pod, buf, cap, "pod_owner_kind", |s, id| {
        s.pod(id).controller().map(|o| o.kind.clone())
    })
}

fn pod_has_state(
    mut c: Caller<'_, CallState>,
    pod: i32,
    flags: i32,
    state_ptr: i32,
    state_len: i32,
) -> Result<i32, wasmtime::Error> {
    let answer = with_str(
        &mut c,
        state_ptr,
        state_len,
        MAX_NAME,
        "pod_has_state: state",
        |want, st| Ok(st.pod(pod).map(|(s, id)| has_state(s, id, flags, want))),
    )?;
    match answer {
        Ok(b) => Ok(i32::from(b)),
        Err(e) => Err(malformed(c.data_mut(), format!("pod_has_state: {e}"))),
    }
}

/// The linker with every host function of ABI v1 (the loader adds v1.1's facts, `facts::link`).
pub fn linker(engine: &wasmtime::Engine) -> Result<Linker<CallState>, wasmtime::Error> {
    let mut l = Linker::new(engine);
    let m = IMPORT_MODULE;
    l.func_wrap(m, HOST_NODE_COUNT, |c: Caller<'_, CallState>| {
        c.data().table.nodes.len() as i32
    })?;
    l.func_wrap(m, HOST_POD_COUNT, |c: Caller<'_, CallState>| {
        c.data().full().pods.len() as i32
    })?;
    l.func_wrap(m, HOST_NAMESPACE_COUNT, |c: Caller<'_, CallState>| {
        c.data().full().namespaces.len() as i32
    })?;
    l.func_wrap(m, HOST_POD_COLUMN, pod_column)?;
    l.func_wrap(m, HOST_NAMESPACE_NAME, namespace_name)?;
    l.func_wrap(m, HOST_NODE_NAME, node_name)?;
    l.func_wrap(m, HOST_POD_NAME, pod_name)?;
    l.func_wrap(m, HOST_POD_LABEL, pod_label)?;
    l.func_wrap(m, HOST_POD_OWNER_KIND, pod_owner_kind)?;
    l.func_wrap(m, HOST_POD_HAS_STATE, pod_has_state)?;
    l.func_wrap(m, HOST_NOMINATE, nominate)?;
    l.func_wrap(m, HOST_REASON_NUMBER, reason_number)?;
    l.func_wrap(m, HOST_REASON_FLAG, reason_flag)?;
    l.func_wrap(m, HOST_FAIL, fail)?;
    l.func_wrap(m, HOST_EXPLAIN, explain)?;
    Ok(l)
}
