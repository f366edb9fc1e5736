//! The order kube-apiserver lists objects in, for snapshots loaded from a file: per kind, by
//! `namespace/name` as bytes (`name` alone for cluster-scoped objects) — the key order the live
//! cluster state keeps (`src/cluster/state.rs`). Plans depend on object order (node ids, the order
//! pods are considered in), so a file's order must not: any order of the same objects gives the
//! same snapshot.

use std::cmp::Ordering;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::SnapshotBuilder;

/// Compares the list keys of two objects (`namespace/name`, or `name` without a namespace)
/// without building them.
pub(crate) fn cmp_listed(a: (&str, &str), b: (&str, &str)) -> Ordering {
    fn bytes<'a>((namespace, name): (&'a str, &'a str)) -> impl Iterator<Item = u8> + 'a {
        let sep: &[u8] = if namespace.is_empty() { b"" } else { b"/" };
        namespace
            .bytes()
            .chain(sep.iter().copied())
            .chain(name.bytes())
    }
    // Most keys differ in their namespace or not at all before the name: compare the parts
    // directly when the namespaces are equal.
    if a.0 == b.0 {
        return a.1.cmp(b.1);
    }
    bytes(a).cmp(bytes(b))
}

fn meta_key(m: &ObjectMeta) -> (&str, &str) {
    (
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
    )
}

impl SnapshotBuilder {
    /// Puts the objects of each kind in the order the API lists them (a stable sort: objects with
    /// the same key keep their order among themselves, for the duplicate rules to see).
    pub fn order_as_listed(&mut self) {
        self.nodes
            .sort_by(|a, b| cmp_listed(("", &a.name), ("", &b.name)));
        self.pods
            .sort_by(|a, b| cmp_listed((&a.namespace, &a.name), (&b.namespace, &b.name)));
        self.pdbs
            .sort_by(|a, b| cmp_listed(meta_key(&a.metadata), meta_key(&b.metadata)));
        self.replica_sets
            .sort_by(|a, b| cmp_listed((&a.namespace, &a.name), (&b.namespace, &b.name)));
        self.deployments
            .sort_by(|a, b| cmp_listed((&a.namespace, &a.name), (&b.namespace, &b.name)));
        self.stateful_sets
            .sort_by(|a, b| cmp_listed(meta_key(&a.metadata), meta_key(&b.metadata)));
        self.jobs
            .sort_by(|a, b| cmp_listed(meta_key(&a.metadata), meta_key(&b.metadata)));
        self.hpas
            .sort_by(|a, b| cmp_listed((&a.namespace, &a.name), (&b.namespace, &b.name)));
    }
}

#[cfg(test)]
mod tests {
    use super::cmp_listed;
    use std::cmp::Ordering;

    #[test]
    fn keys_compare_as_the_api_spells_them() {
        // `a-b/x` < `a/x` as bytes ('-' < '/'), though `a` < `a-b` as a namespace.
        assert_eq!(cmp_listed(("a-b", "x"), ("a", "x")), Ordering::Less);
        assert_eq!(cmp_listed(("a", "y"), ("a", "x")), Ordering::Greater);
        assert_eq!(cmp_listed(("", "n1"), ("", "n10")), Ordering::Less);
        assert_eq!(cmp_listed(("ns", "p"), ("ns", "p")), Ordering::Equal);
        // `a/b` against the namespace `a.b`: '/' > '.'.
        assert_eq!(cmp_listed(("a", "b"), ("a.b", "c")), Ordering::Greater);
    }
}
