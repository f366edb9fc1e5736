//! ABI v1.1: the additive host functions for what the columns cannot carry — a node's taints and a
//! pod's tolerations, conditions, container statuses and owner references, each copied as one JSON
//! array (as `node_name` copies a name: at most `cap` bytes, the full length returned) — and
//! `reason_string`, a string fact on the last nomination. A module importing none of them is an
//! ABI v1 module and loads and decides as before; `kd_abi_version` stays 1.

use serde::Serialize;
use wasmtime::{Caller, Linker};

use super::abi::*;
use super::host::{pod_string, read_str, reason_value, with_node, write_bytes};
use crate::snapshot::model::{ContainerState, Pod};

/// A taint as `node_taints` gives it (an absent value is `""`).
#[derive(Serialize)]
struct TaintFact<'a> {
    key: &'a str,
    value: &'a str,
    effect: &'a str,
}

/// A toleration as `pod_tolerations` gives it (absent fields are `""`).
#[derive(Serialize)]
struct TolerationFact<'a> {
    key: &'a str,
    operator: &'a str,
    value: &'a str,
    effect: &'a str,
}

/// A condition as `pod_conditions` gives it (an absent reason is `""`; `lastTransitionUnix` is
/// Unix seconds, `null` when absent).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConditionFact<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    last_transition_unix: Option<i64>,
}

/// A container status as `pod_containers` gives it: `kind` is `app`, `init` or `ephemeral`;
/// absent reasons are `""`, absent exit codes `null`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerFact<'a> {
    name: &'a str,
    kind: &'static str,
    restart_count: i32,
    ready: bool,
    waiting_reason: &'a str,
    terminated_reason: &'a str,
    exit_code: Option<i32>,
    last_exit_code: Option<i32>,
}

/// An owner reference as `pod_owners` gives it.
#[derive(Serialize)]
struct OwnerFact<'a> {
    kind: &'a str,
    name: &'a str,
    controller: bool,
}

fn json<T: Serialize>(items: &[T]) -> String {
    // Serializing these plain structs cannot fail; an empty array stands for any surprise.
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

fn tolerations(pod: &Pod) -> String {
    let facts: Vec<_> = pod
        .tolerations
        .iter()
        .map(|t| TolerationFact {
            key: t.key.as_deref().unwrap_or(""),
            operator: t.operator.as_deref().unwrap_or(""),
            value: t.value.as_deref().unwrap_or(""),
            effect: t.effect.as_deref().unwrap_or(""),
        })
        .collect();
    json(&facts)
}

fn conditions(pod: &Pod) -> String {
    let facts: Vec<_> = pod
        .conditions
        .iter()
        .map(|c| ConditionFact {
            type_: &c.type_,
            status: &c.status,
            reason: c.reason.as_deref().unwrap_or(""),
            last_transition_unix: c.last_transition.map(|t| t.as_second()),
        })
        .collect();
    json(&facts)
}

fn container_fact<'a>(c: &'a ContainerState, kind: &'static str) -> ContainerFact<'a> {
    ContainerFact {
        name: &c.name,
        kind,
        restart_count: c.restart_count,
        ready: c.ready,
        waiting_reason: c.waiting_reason.as_deref().unwrap_or(""),
        terminated_reason: c.terminated_reason.as_deref().unwrap_or(""),
        exit_code: c.terminated_exit_code,
        last_exit_code: c.last_terminated_exit_code,
    }
}

fn containers(pod: &Pod) -> String {
    let facts: Vec<_> = pod
        .container_states
        .iter()
        .map(|c| container_fact(c, "app"))
        .chain(
            pod.init_container_states
                .iter()
                .map(|c| container_fact(c, "init")),
        )
        .chain(
            pod.ephemeral_container_states
                .iter()
                .map(|c| container_fact(c, "ephemeral")),
        )
        .collect();
    json(&facts)
}

fn owners(pod: &Pod) -> String {
    let facts: Vec<_> = pod
        .owners
        .iter()
        .map(|o| OwnerFact {
            kind: &o.kind,
            name: &o.name,
            controller: o.controller,
        })
        .collect();
    json(&facts)
}

/// `node_taints`: the taints of node index `node` of the call.
fn node_taints(
    mut c: Caller<'_, CallState>,
    node: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, wasmtime::Error> {
    let text = with_node(&mut c, node, HOST_NODE_TAINTS, |s, n| {
        let facts: Vec<_> = s
            .node(n)
            .taints
            .iter()
            .map(|t| TaintFact {
                key: &t.key,
                value: t.value.as_deref().unwrap_or(""),
                effect: &t.effect,
            })
            .collect();
        json(&facts)
    })?;
    write_bytes(&mut c, text.as_bytes(), buf, cap, HOST_NODE_TAINTS)
}

/// `reason_string`: a string fact (at most [`MAX_REASON_TEXT`] bytes) on the last nomination.
fn reason_string(
    mut c: Caller<'_, CallState>,
    key_ptr: i32,
    key_len: i32,
    value_ptr: i32,
    value_len: i32,
) -> Result<i32, wasmtime::Error> {
    let value = read_str(
        &mut c,
        value_ptr,
        value_len,
        MAX_REASON_TEXT,
        "reason_string: value",
    )?;
    reason_value(
        c,
        key_ptr,
        key_len,
        crate::evictor::reason::ReasonValue::Text(value.into()),
        HOST_REASON_STRING,
    )
}

/// Adds the v1.1 host functions to `l`.
pub fn link(l: &mut Linker<CallState>) -> Result<(), wasmtime::Error> {
    let m = IMPORT_MODULE;
    l.func_wrap(m, HOST_NODE_TAINTS, node_taints)?;
    for (name, fact) in [
        (HOST_POD_TOLERATIONS, tolerations as fn(&Pod) -> String),
        (HOST_POD_CONDITIONS, conditions),
        (HOST_POD_CONTAINERS, containers),
        (HOST_POD_OWNERS, owners),
    ] {
        l.func_wrap(
            m,
            name,
            move |mut c: Caller<'_, CallState>, pod: i32, buf: i32, cap: i32| {
                pod_string(&mut c, pod, buf, cap, name, |s, id| Some(fact(s.pod(id))))
            },
        )?;
    }
    l.func_wrap(m, HOST_REASON_STRING, reason_string)?;
    Ok(())
}
