//! Kinds served from stored CustomResourceDefinitions, as kube-apiserver's apiextensions server
//! serves them: once a CRD is stored, every `served` version of its group appears in discovery and
//! the OpenAPI v3 index, and its objects are stored and patched like built-in kinds.
//!
//! Not modelled: schema validation, pruning and defaulting (objects are stored as sent), the
//! `Established` condition, the `scale` subresource, conversion, and cascading deletion of the
//! objects when the CRD is deleted (its kind just stops being served).
use std::sync::Mutex;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::resources::{ResourceDef, by_gvr};
use crate::store::{GrKey, Store};

/// Definitions made from CRDs, leaked once per distinct definition for the process (the
/// registry's `&'static` type); each sim serves only those its own CRDs describe.
static INTERNED: Mutex<Vec<&'static ResourceDef>> = Mutex::new(Vec::new());

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn leak_list(items: &[String]) -> &'static [&'static str] {
    Box::leak(
        items
            .iter()
            .map(|s| leak(s))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

struct Wanted<'a> {
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    singular: String,
    kind: &'a str,
    namespaced: bool,
    short_names: &'a [String],
    status: bool,
    categories: &'a [String],
}

impl Wanted<'_> {
    fn matches(&self, d: &ResourceDef) -> bool {
        d.group == self.group
            && d.version == self.version
            && d.resource == self.resource
            && d.singular == self.singular
            && d.kind == self.kind
            && d.namespaced == self.namespaced
            && d.short_names.iter().eq(self.short_names.iter())
            && d.has_status() == self.status
            && d.categories.iter().eq(self.categories.iter())
    }

    fn intern(&self) -> &'static ResourceDef {
        let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = all.iter().find(|d| self.matches(d)) {
            return d;
        }
        let def: &'static ResourceDef = Box::leak(Box::new(ResourceDef {
            group: leak(self.group),
            version: leak(self.version),
            resource: leak(self.resource),
            singular: leak(&self.singular),
            kind: leak(self.kind),
            namespaced: self.namespaced,
            short_names: leak_list(self.short_names),
            subresources: if self.status { &["status"] } else { &[] },
            generation: true,
            create_only: false,
            categories: leak_list(self.categories),
        }));
        all.push(def);
        def
    }
}

fn defs_of(crd: &CustomResourceDefinition) -> Vec<&'static ResourceDef> {
    let spec = &crd.spec;
    let names = &spec.names;
    if spec.group.is_empty() || names.plural.is_empty() || names.kind.is_empty() {
        return Vec::new();
    }
    let no_strings: Vec<String> = Vec::new();
    spec.versions
        .iter()
        .filter(|v| v.served && !v.name.is_empty())
        .map(|v| {
            Wanted {
                group: &spec.group,
                version: &v.name,
                resource: &names.plural,
                singular: names
                    .singular
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| names.kind.to_lowercase()),
                kind: &names.kind,
                namespaced: spec.scope == "Namespaced",
                short_names: names.short_names.as_deref().unwrap_or(&no_strings),
                status: v.subresources.as_ref().is_some_and(|s| s.status.is_some()),
                categories: names.categories.as_deref().unwrap_or(&no_strings),
            }
            .intern()
        })
        .collect()
}

/// The kinds this sim serves from its stored CRDs (malformed CRDs are skipped).
pub fn served(store: &Store) -> Vec<&'static ResourceDef> {
    let Some(crd_def) = by_gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for obj in store.list(crd_def, None).0 {
        if let Ok(crd) = serde_json::from_value::<CustomResourceDefinition>(obj) {
            for d in defs_of(&crd) {
                // Built-in kinds win, as the apiserver's delegation order does.
                if by_gvr(d.group, d.version, d.resource).is_none() && !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// A built-in resource, else one served from a CRD.
pub fn lookup_gvr(
    store: &Store,
    group: &str,
    version: &str,
    resource: &str,
) -> Option<&'static ResourceDef> {
    by_gvr(group, version, resource).or_else(|| {
        served(store)
            .into_iter()
            .find(|d| d.group == group && d.version == version && d.resource == resource)
    })
}

/// A built-in kind (see [`crate::resources::by_kind`]), else one served from a CRD (matched on
/// group, version and kind).
pub fn lookup_kind(store: &Store, api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    crate::resources::by_kind(api_version, kind).or_else(|| {
        let (group, version) = api_version.split_once('/')?;
        served(store)
            .into_iter()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
    })
}

/// Any definition ever made from a CRD with this group and resource (events carry only the key).
pub fn interned(gr: GrKey) -> Option<&'static ResourceDef> {
    INTERNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|d| d.group == gr.0 && d.resource == gr.1)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use serde_json::json;

    /// A CRD `<plural>.example.com` of `kind` whose v1 is `served` or not.
    fn crd(kind: &str, plural: &str, served: bool) -> serde_json::Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "kind": kind, "shortNames": ["w"]},
                     "versions": [{"name": "v1", "served": served, "storage": true,
                                   "subresources": {"status": {}}}]}
        })
    }

    #[test]
    fn stored_crds_serve_their_served_versions_only_in_their_own_store() {
        let store = Store::new(SimClock::new(1.0), 10);
        let other = Store::new(SimClock::new(1.0), 10);
        let def = by_gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions").unwrap();
        let add = |object| store.create(def, object, false, true).unwrap();
        add(crd("Widget", "widgets", true));
        add(crd("Gadget", "gadgets", false));
        // Not a CRD the decoder accepts: skipped.
        add(json!({"metadata": {"name": "broken.example.com"}, "spec": "nope"}));

        let now = served(&store);
        assert_eq!(now.len(), 1, "{now:?}");
        let w = now[0];
        assert_eq!(
            (w.group, w.version, w.resource, w.kind),
            ("example.com", "v1", "widgets", "Widget")
        );
        assert_eq!(w.singular, "widget");
        assert!(w.namespaced && w.has_status());
        assert_eq!(w.short_names, ["w"]);
        assert_eq!(lookup_gvr(&store, "example.com", "v1", "widgets"), Some(w));
        assert_eq!(lookup_kind(&store, "example.com/v1", "Widget"), Some(w));
        assert_eq!(
            lookup_kind(&store, "example.com/v1", "Gadget"),
            None,
            "not served"
        );
        assert_eq!(interned(("example.com", "widgets")), Some(w));
        // Interned once: asking again gives the same definition.
        assert!(std::ptr::eq(served(&store)[0], w));
        // Another sim without the CRD does not serve the kind.
        assert_eq!(lookup_gvr(&other, "example.com", "v1", "widgets"), None);
        // Built-in kinds still resolve.
        assert!(lookup_kind(&other, "apps/v1", "Deployment").is_some());
    }
}
