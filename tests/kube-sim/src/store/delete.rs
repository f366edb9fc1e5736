//! Deletion: graceful deletion of pods and finalized objects, immediate removal, the
//! namespace cascade and background garbage collection of dependents.
use serde_json::{Value, json};

use super::{
    DeleteOpts, EventType, GrKey, Inner, Store, finalizers_empty, meta_mut, meta_str, stored_gr,
};
use crate::clock::format_time;
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;
use crate::versions;

/// The conflict a delete's preconditions raise against `existing`, as `rest.BeforeDelete`
/// words it (the eviction subresource checks the same two with the same words).
pub fn precondition_failure(
    def: &ResourceDef,
    existing: &Value,
    opts: &DeleteOpts,
) -> Option<ApiError> {
    let conflict =
        |why: String| ApiError::conflict(def.group, def.kind, meta_str(existing, "name"), &why);
    let uid = meta_str(existing, "uid");
    if let Some(want) = &opts.uid
        && want != uid
    {
        return Some(conflict(format!(
            "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )));
    }
    let rv = meta_str(existing, "resourceVersion");
    if let Some(want) = &opts.resource_version
        && want != rv
    {
        return Some(conflict(format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )));
    }
    None
}

/// How a delete treats an object.
enum Deletion {
    /// Removed at once.
    Now,
    /// Marked with this `deletionTimestamp` and grace period (seconds).
    Graceful(String, i64),
    /// Already terminating with a grace period no longer than the one asked: left as it is.
    Unchanged,
}

/// Objects with finalizers are marked (keeping an earlier mark's time, grace 0); bound,
/// non-terminal pods are marked for their grace period (`CheckGracefulDelete`); the rest go now.
fn deletion_kind(
    def: &ResourceDef,
    existing: &Value,
    opts: &DeleteOpts,
    now: jiff::Timestamp,
) -> Deletion {
    if !finalizers_empty(existing) {
        let ts = existing
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| format_time(now));
        return Deletion::Graceful(ts, 0);
    }
    if !def.is("", "pods") {
        return Deletion::Now;
    }
    let phase = existing
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let bound = existing
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminal = phase == "Succeeded" || phase == "Failed";
    let grace = opts
        .grace_period_seconds
        .or_else(|| {
            existing
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0);
    if !bound || terminal || grace == 0 {
        return Deletion::Now;
    }
    let current = existing
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    // rest.BeforeDelete: an already-terminating object only accepts a shorter grace period.
    if let Some(cur) = current
        && grace >= cur
    {
        return Deletion::Unchanged;
    }
    let ts = now
        .checked_add(jiff::SignedDuration::from_secs(grace))
        .unwrap_or(now);
    Deletion::Graceful(format_time(ts), grace)
}

impl Store {
    /// Deletes an object the way the generic registry does: objects with finalizers and
    /// bound, non-terminal pods are marked with `deletionTimestamp` (graceful deletion,
    /// `pkg/registry/core/pod/strategy.go` `CheckGracefulDelete`); everything else goes now.
    pub fn delete(
        &self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<Value> {
        let mut inner = self.lock();
        let (gr, key, existing) = stored(&inner, def, ns, name)?;
        if let Some(e) = precondition_failure(def, &existing, opts) {
            return Err(e);
        }
        let now = self.clock.now();
        let rv = inner.rv + 1;
        match deletion_kind(def, &existing, opts, now) {
            Deletion::Unchanged => return Ok(versions::present(def, existing)),
            Deletion::Now => {}
            Deletion::Graceful(ts, grace) => {
                let mut new = existing.clone();
                {
                    let m = meta_mut(&mut new);
                    m.insert("deletionTimestamp".into(), json!(ts));
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    m.insert("resourceVersion".into(), json!(rv.to_string()));
                }
                if opts.dry_run {
                    return Ok(versions::present(def, new));
                }
                inner.rv = rv;
                self.put_modified(&mut inner, gr, key, new.clone(), existing);
                return Ok(versions::present(def, new));
            }
        }
        let mut gone = existing;
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(rv.to_string()));
        if opts.dry_run {
            return Ok(versions::present(def, gone));
        }
        self.remove_locked(&mut inner, gr, key, gone.clone());
        if opts.propagation.as_deref() != Some("Orphan") {
            self.collect_dependents(&mut inner, &gone, now);
        }
        Ok(versions::present(def, gone))
    }

    fn remove_locked(&self, inner: &mut Inner, gr: GrKey, key: (String, String), obj: Value) {
        inner.rv += 1;
        let mut obj = obj;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(inner.rv.to_string()));
        inner.objects.take(gr, &key);
        // Deleting a namespace deletes its contents (the namespace controller, collapsed).
        if gr == ("", "namespaces") {
            let ns = key.1.clone();
            let victims = inner.objects.get_all(inner.objects.in_namespace(&ns));
            self.push(inner, gr, EventType::Deleted, obj, None);
            for (g, k, v) in victims {
                self.remove_locked(inner, g, k, v);
            }
            return;
        }
        self.push(inner, gr, EventType::Deleted, obj, None);
    }

    /// Background garbage collection, collapsed into the delete: dependents whose
    /// ownerReferences name the deleted uid are deleted too (pods gracefully).
    fn collect_dependents(&self, inner: &mut Inner, owner: &Value, now: jiff::Timestamp) {
        let mut work = vec![meta_str(owner, "uid").to_string()];
        let mut rounds = 0;
        while let Some(uid) = work.pop() {
            rounds += 1;
            if rounds > 10_000 {
                break;
            }
            let deps = inner.objects.get_all(inner.objects.dependents_of(&uid));
            for (g, k, v) in deps {
                let bound_pod = g == ("", "pods")
                    && v.pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .is_some_and(|n| !n.is_empty())
                    && !matches!(
                        v.pointer("/status/phase").and_then(Value::as_str),
                        Some("Succeeded" | "Failed")
                    );
                if bound_pod {
                    if v.pointer("/metadata/deletionTimestamp").is_some() {
                        continue;
                    }
                    let grace = v
                        .pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                        .unwrap_or(30)
                        .max(0);
                    let ts = now
                        .checked_add(jiff::SignedDuration::from_secs(grace))
                        .unwrap_or(now);
                    let mut new = v.clone();
                    inner.rv += 1;
                    {
                        let m = meta_mut(&mut new);
                        m.insert("deletionTimestamp".into(), json!(format_time(ts)));
                        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                        m.insert("resourceVersion".into(), json!(inner.rv.to_string()));
                    }
                    self.put_modified(inner, g, k, new, v);
                } else {
                    work.push(meta_str(&v, "uid").to_string());
                    self.remove_locked(inner, g, k, v);
                }
            }
        }
    }

    /// Immediate removal with an optional uid precondition (controllers, kubelet).
    pub fn remove(
        &self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> ApiResult<Value> {
        let mut inner = self.lock();
        let (gr, key, existing) = stored(&inner, def, ns, name)?;
        if let Some(uid) = uid
            && !uid.is_empty()
            && uid != meta_str(&existing, "uid")
        {
            return Err(ApiError::conflict(
                def.group,
                def.resource,
                name,
                "Precondition failed: UID mismatch",
            ));
        }
        self.remove_locked(&mut inner, gr, key, existing.clone());
        Ok(versions::present(def, existing))
    }
}

/// The stored object `ns/name` of `def` with its storage keys; not found if absent.
fn stored(
    inner: &Inner,
    def: &'static ResourceDef,
    ns: &str,
    name: &str,
) -> ApiResult<(GrKey, super::objects::Key, Value)> {
    let gr = stored_gr(def);
    let key = (ns.to_string(), name.to_string());
    let existing = inner.objects.get(&gr, &key);
    let existing = existing.ok_or_else(|| ApiError::not_found(def.group, def.resource, name))?;
    Ok((gr, key, existing))
}
