//! Resource amounts (requests, allocatable) in the units the scheduler uses.

use std::collections::BTreeMap;

use crate::quantity::Quantity;

/// Well-known resource names.
pub const CPU: &str = "cpu";
/// Memory in bytes.
pub const MEMORY: &str = "memory";
/// Pod slots.
pub const PODS: &str = "pods";
/// Local ephemeral storage in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// kube-scheduler's CPU request for scoring a pod that requests none (`DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// kube-scheduler's memory request for scoring a pod that requests none
/// (`DefaultMemoryRequest`, 200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A set of resource amounts. CPU is in millicores; everything else in whole units (rounded up).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pod count (only meaningful for node allocatable; a pod requests one slot).
    pub pods: i64,
    /// Extended and other resources by name, sorted by name.
    pub scalar: Vec<(String, i64)>,
}

impl Resources {
    /// Converts a Kubernetes resource list. Returns the name of the first invalid quantity on error.
    pub fn from_list(
        list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> Result<Self, (String, crate::quantity::QuantityError)> {
        let mut r = Resources::default();
        for (name, q) in list {
            let parsed = Quantity::parse(&q.0).map_err(|e| (name.clone(), e))?;
            r.set(
                name,
                if name == CPU {
                    parsed.milli_value()
                } else {
                    parsed.value()
                },
            );
        }
        Ok(r)
    }

    /// The amount of `name` (0 when absent). CPU is in millicores.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu_milli,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            other => self
                .scalar
                .binary_search_by(|(n, _)| n.as_str().cmp(other))
                .map(|i| self.scalar[i].1)
                .unwrap_or(0),
        }
    }

    /// Whether `name` is present (non-zero or explicitly listed for scalars).
    pub fn has(&self, name: &str) -> bool {
        match name {
            CPU | MEMORY | EPHEMERAL_STORAGE | PODS => true,
            other => self
                .scalar
                .binary_search_by(|(n, _)| n.as_str().cmp(other))
                .is_ok(),
        }
    }

    /// Sets the amount of `name`.
    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu_milli = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            PODS => self.pods = value,
            other => match self.scalar.binary_search_by(|(n, _)| n.as_str().cmp(other)) {
                Ok(i) => self.scalar[i].1 = value,
                Err(i) => self.scalar.insert(i, (other.to_string(), value)),
            },
        }
    }

    /// Adds `other` to `self`, resource by resource.
    /// (CPU millicores, memory) with kube-scheduler's non-zero defaults for scoring a pod that
    /// requests none: [`DEFAULT_MILLI_CPU_REQUEST`], [`DEFAULT_MEMORY_REQUEST`] (applied to the
    /// pod's total: the lean model keeps no per-container requests).
    pub fn nonzero_cpu_memory(&self) -> (i64, i64) {
        let cpu = match self.cpu_milli {
            0 => DEFAULT_MILLI_CPU_REQUEST,
            c => c,
        };
        let memory = match self.memory {
            0 => DEFAULT_MEMORY_REQUEST,
            m => m,
        };
        (cpu, memory)
    }

    pub fn add(&mut self, other: &Resources) {
        self.combine(other, |a, b| a.saturating_add(b));
    }

    /// Subtracts `other` from `self`, resource by resource.
    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, |a, b| a.saturating_sub(b));
    }

    /// Takes the per-resource maximum of `self` and `other`.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        self.cpu_milli = f(self.cpu_milli, other.cpu_milli);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = f(self.pods, other.pods);
        for (name, v) in &other.scalar {
            let cur = self.get(name);
            self.set(name, f(cur, *v));
        }
    }

    /// Names of all resources with an entry (the four native ones plus scalars).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        [CPU, MEMORY, EPHEMERAL_STORAGE, PODS]
            .into_iter()
            .chain(self.scalar.iter().map(|(n, _)| n.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    #[test]
    fn converts_and_combines() {
        let list: BTreeMap<String, Q> = [
            ("cpu".to_string(), Q("250m".into())),
            ("memory".to_string(), Q("1Gi".into())),
            ("nvidia.com/gpu".to_string(), Q("2".into())),
        ]
        .into();
        let mut r = Resources::from_list(&list).unwrap();
        assert_eq!(r.get(CPU), 250);
        assert_eq!(r.get(MEMORY), 1 << 30);
        assert_eq!(r.get("nvidia.com/gpu"), 2);
        assert_eq!(r.get("example.com/foo"), 0);
        let other = r.clone();
        r.add(&other);
        assert_eq!(r.get("nvidia.com/gpu"), 4);
        r.sub(&other);
        r.sub(&other);
        assert_eq!(r.get(CPU), 0);
        let bad: BTreeMap<String, Q> = [("memory".to_string(), Q("lots".into()))].into();
        assert_eq!(Resources::from_list(&bad).unwrap_err().0, "memory");
    }
}
