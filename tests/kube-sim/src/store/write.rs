//! Writes: creating an object and replacing one (compare-and-swap on `resourceVersion`).
use serde_json::{Value, json};

use super::{
    EventType, Inner, Store, UpdateMode, finalizers_empty, into_storage, meta_mut, meta_str,
    same_ignoring_rv, set_type,
};
use crate::clock::format_time;
use crate::defaults;
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;
use crate::versions;

/// The metadata a replace keeps from the stored object, whatever the new one says.
const KEPT_ON_UPDATE: [&str; 7] = [
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

impl Store {
    /// Creates an object. `keep_identity` keeps a given uid/creationTimestamp (snapshot load).
    pub fn create(
        &self,
        def: &'static ResourceDef,
        obj: Value,
        dry_run: bool,
        keep_identity: bool,
    ) -> ApiResult<Value> {
        let (sdef, mut obj) = into_storage(def, obj)?;
        set_type(sdef, &mut obj);
        let ns = meta_str(&obj, "namespace").to_string();
        if def.namespaced && ns.is_empty() {
            return Err(ApiError::bad_request(
                "the namespace of the object is required",
            ));
        }
        let name = self.name_for_create(def, &obj)?;
        self.stamp_identity(def, &mut obj, &name, &ns, keep_identity);
        if !keep_identity && sdef.is("", "pods") {
            crate::pod_admission::on_create(self, &mut obj)?;
        }
        defaults::apply(sdef, &mut obj);
        crate::schema::canonicalize_bytes(sdef, &mut obj);
        crate::schema::validate(sdef, &obj)?;
        let mut inner = self.lock();
        let key = (ns, name.clone());
        let gr = (sdef.group, sdef.resource);
        if inner.objects.contains(&gr, &key) {
            return Err(ApiError::already_exists(def.group, def.resource, &name));
        }
        let rv = inner.rv + 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        if dry_run {
            return Ok(versions::present(def, obj));
        }
        inner.rv = rv;
        inner.objects.put(gr, key, &obj);
        self.push(&mut inner, gr, EventType::Added, obj.clone(), None);
        Ok(versions::present(def, obj))
    }

    /// The new object's name: `metadata.name`, else `generateName` plus a random suffix.
    fn name_for_create(&self, def: &ResourceDef, obj: &Value) -> ApiResult<String> {
        let name = meta_str(obj, "name");
        if !name.is_empty() {
            return Ok(name.to_string());
        }
        let gen_name = meta_str(obj, "generateName");
        if gen_name.is_empty() {
            let group = if def.group.is_empty() {
                String::new()
            } else {
                format!(".{}", def.group)
            };
            return Err(ApiError::invalid(
                &format!("{}{group}", def.kind),
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        Ok(format!("{gen_name}{}", self.name_suffix()))
    }

    /// Sets the server-owned metadata of a new object: name, namespace, uid, creation time,
    /// generation 1; `keep_identity` keeps a given uid, creation time, generation and deletion
    /// marks.
    fn stamp_identity(
        &self,
        def: &ResourceDef,
        obj: &mut Value,
        name: &str,
        ns: &str,
        keep_identity: bool,
    ) {
        let uid = if keep_identity && !meta_str(obj, "uid").is_empty() {
            meta_str(obj, "uid").to_string()
        } else {
            self.new_uid()
        };
        let created = if keep_identity && !meta_str(obj, "creationTimestamp").is_empty() {
            meta_str(obj, "creationTimestamp").to_string()
        } else {
            format_time(self.clock.now())
        };
        let m = meta_mut(obj);
        m.insert("name".into(), json!(name));
        if def.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(created));
        if def.generation && !(keep_identity && m.contains_key("generation")) {
            m.insert("generation".into(), json!(1));
        }
        if !keep_identity {
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
        }
        m.remove("selfLink");
    }

    /// Replaces an object with compare-and-swap on `metadata.resourceVersion` (when set).
    pub fn update(
        &self,
        def: &'static ResourceDef,
        obj: Value,
        mode: UpdateMode,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let (sdef, obj) = into_storage(def, obj)?;
        let ns = if def.namespaced {
            meta_str(&obj, "namespace").to_string()
        } else {
            String::new()
        };
        let name = meta_str(&obj, "name").to_string();
        let mut inner = self.lock();
        let gr = (sdef.group, sdef.resource);
        let key = (ns, name.clone());
        let Some(existing) = inner.objects.get(&gr, &key) else {
            return Err(ApiError::not_found(def.group, def.resource, &name));
        };
        check_update_preconditions(def, &obj, &existing)?;
        let mut new = merged_for_mode(def, mode, obj, &existing);
        set_type(sdef, &mut new);
        keep_system_meta(&mut new, &existing);
        defaults::apply(sdef, &mut new);
        crate::schema::canonicalize_bytes(sdef, &mut new);
        crate::schema::validate(sdef, &new)?;
        bump_generation(def, sdef, mode, &mut new, &existing);
        if same_ignoring_rv(&new, &existing) {
            // No-op updates keep the resourceVersion (etcd3 store `GuaranteedUpdate`).
            return Ok(versions::present(def, existing));
        }
        let rv = inner.rv + 1;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
        if dry_run {
            return Ok(versions::present(def, new));
        }
        inner.rv = rv;
        self.store_updated(&mut inner, def, gr, key, new.clone(), existing);
        Ok(versions::present(def, new))
    }

    /// Stores a replaced object and sends its event; an object being deleted whose last
    /// finalizer went (pods aside) goes away now instead.
    fn store_updated(
        &self,
        inner: &mut Inner,
        def: &'static ResourceDef,
        gr: super::GrKey,
        key: super::objects::Key,
        new: Value,
        existing: Value,
    ) {
        let finished = new.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers_empty(&new)
            && !def.is("", "pods");
        if finished {
            inner.objects.take(gr, &key);
            self.push(inner, gr, EventType::Deleted, new, Some(existing));
        } else {
            self.put_modified(inner, gr, key, new, existing);
        }
    }
}

/// A replace's preconditions: the object's resourceVersion and uid, when it sets them, must be
/// the stored one's.
fn check_update_preconditions(def: &ResourceDef, obj: &Value, existing: &Value) -> ApiResult<()> {
    let name = meta_str(obj, "name");
    let want_rv = meta_str(obj, "resourceVersion");
    if !want_rv.is_empty() && want_rv != meta_str(existing, "resourceVersion") {
        return Err(ApiError::stale(def.group, def.resource, name));
    }
    let want_uid = meta_str(obj, "uid");
    if !want_uid.is_empty() && want_uid != meta_str(existing, "uid") {
        return Err(ApiError::conflict(
            def.group,
            def.resource,
            name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {}",
                meta_str(existing, "uid")
            ),
        ));
    }
    Ok(())
}

/// The object a replace writes: the main resource keeps the stored status, a status update
/// keeps the stored metadata and spec (`ResetObjectMetaForStatus`), a full one takes it all.
fn merged_for_mode(def: &ResourceDef, mode: UpdateMode, obj: Value, existing: &Value) -> Value {
    match mode {
        UpdateMode::Main => {
            let mut n = obj;
            if def.has_status()
                && let Some(m) = n.as_object_mut()
            {
                match existing.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.remove("status");
                    }
                }
            }
            n
        }
        UpdateMode::Status => {
            let mut n = existing.clone();
            if let (Some(m), Some(s)) = (n.as_object_mut(), obj.get("status")) {
                m.insert("status".into(), s.clone());
            }
            n
        }
        UpdateMode::Full => obj,
    }
}

/// Puts back the server-owned metadata of the stored object (present or absent as it was there).
fn keep_system_meta(new: &mut Value, existing: &Value) {
    let old_meta = existing
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let m = meta_mut(new);
    for f in KEPT_ON_UPDATE {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("selfLink");
}

/// Raises `metadata.generation` when a non-status write changes the spec. A client's
/// Deployment write also counts annotation changes (they are copied to ReplicaSets); the
/// controllers' writes stand for the Deployment controller's status updates, which may change
/// annotations (the revision) without a new generation. (Semantic equality: no annotations and
/// an empty map are the same.)
fn bump_generation(
    def: &ResourceDef,
    sdef: &ResourceDef,
    mode: UpdateMode,
    new: &mut Value,
    existing: &Value,
) {
    let annotations = |o: &Value| {
        o.pointer("/metadata/annotations")
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            .cloned()
    };
    let annotations_moved = mode == UpdateMode::Main
        && sdef.is("apps", "deployments")
        && annotations(new) != annotations(existing);
    if def.generation
        && mode != UpdateMode::Status
        && (new.get("spec") != existing.get("spec") || annotations_moved)
    {
        let g = existing
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(new).insert("generation".into(), json!(g + 1));
    }
}
