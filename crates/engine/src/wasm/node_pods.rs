//! ABI v1.1: reading the pods of one node without the whole table — `node_pod_count`,
//! `node_pod_offset` (the node's pods are the table indexes `offset..offset + count`),
//! `node_pod_column` (a column for the node's pods) — and `pod_namespace`, a pod's namespace by
//! name. The host builds only the offsets and the asked nodes' pod lists ([`super::table`]);
//! a NAMESPACE column builds the whole table (namespace indexes are numbered over it).

use wasmtime::{Caller, Linker};

use super::abi::*;
use super::host::{column_dst, column_value, memory, node_index, pod_string, put_i64s};

/// `node_pod_count`: how many pods of node index `node` the table holds.
fn node_pod_count(mut c: Caller<'_, CallState>, node: i32) -> Result<i32, wasmtime::Error> {
    let j = node_index(&mut c, node, HOST_NODE_POD_COUNT)?;
    let st = c.data();
    let offsets = st.table.offsets(st.snap());
    Ok((offsets[j + 1] - offsets[j]) as i32)
}

/// `node_pod_offset`: the table index of the first pod of node index `node`.
fn node_pod_offset(mut c: Caller<'_, CallState>, node: i32) -> Result<i32, wasmtime::Error> {
    let j = node_index(&mut c, node, HOST_NODE_POD_OFFSET)?;
    let st = c.data();
    Ok(i32::try_from(st.table.offsets(st.snap())[j]).unwrap_or(i32::MAX))
}

/// `node_pod_column`: `column` for the first `count` pods of node index `node`.
fn node_pod_column(
    mut c: Caller<'_, CallState>,
    node: i32,
    column: i32,
    dst: i32,
    count: i32,
) -> Result<i32, wasmtime::Error> {
    let j = node_index(&mut c, node, HOST_NODE_POD_COLUMN)?;
    let n = {
        let st = c.data();
        st.table.node_pods(st.snap(), j).map_or(0, <[_]>::len)
    };
    let mem = memory(&mut c)?;
    let (data, state) = mem.data_and_store_mut(&mut c);
    let (out, count) = column_dst(data, state, HOST_NODE_POD_COLUMN, column, dst, count, n)?;
    let Some(s) = state.snap() else {
        return Ok(0);
    };
    let pods = state.table.node_pods(Some(s), j).unwrap_or_default();
    match column {
        COL_NODE => put_i64s(out, std::iter::repeat_n(j as i64, count)),
        COL_NAMESPACE => {
            let first = state.table.offsets(Some(s))[j] as usize;
            let ns = &state.full().pod_namespace;
            put_i64s(out, ns[first..first + count].iter().map(|&v| i64::from(v)));
        }
        _ => put_i64s(
            out,
            s.prefetched(pods).map(|id| column_value(s, id, column)),
        ),
    }
    Ok(count as i32)
}

/// Adds the host functions for reading one node's pods to `l`.
pub fn link(l: &mut Linker<CallState>) -> Result<(), wasmtime::Error> {
    let m = IMPORT_MODULE;
    l.func_wrap(m, HOST_NODE_POD_COUNT, node_pod_count)?;
    l.func_wrap(m, HOST_NODE_POD_OFFSET, node_pod_offset)?;
    l.func_wrap(m, HOST_NODE_POD_COLUMN, node_pod_column)?;
    l.func_wrap(
        m,
        HOST_POD_NAMESPACE,
        |mut c: Caller<'_, CallState>, pod: i32, buf: i32, cap: i32| {
            pod_string(&mut c, pod, buf, cap, HOST_POD_NAMESPACE, |s, id| {
                Some(s.pod(id).namespace.to_string())
            })
        },
    )?;
    Ok(())
}
