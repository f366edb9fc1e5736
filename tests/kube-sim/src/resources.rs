//! The resource registry: which group/version/resources the stand-in serves.

/// One served resource (the main resource; subresources are listed by name).
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Subresources served (discovery lists them as `resource/sub`).
    pub subresources: &'static [&'static str],
    /// `metadata.generation` bumps when `spec` changes.
    pub generation: bool,
    /// Create-only virtual resources (TokenReview, SubjectAccessReview).
    pub create_only: bool,
    pub categories: &'static [&'static str],
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }

    pub fn is(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }

    /// Whether a PUT of a missing object creates it (the registry strategy's
    /// `AllowCreateOnUpdate`; Leases and Events among them).
    pub fn creates_on_update(&self) -> bool {
        matches!(
            (self.group, self.resource),
            ("coordination.k8s.io", "leases" | "leasecandidates")
                | ("", "events" | "endpoints" | "limitranges" | "services")
                | ("events.k8s.io", "events")
                | (
                    "rbac.authorization.k8s.io",
                    "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
                )
                | ("node.k8s.io", "runtimeclasses")
        )
    }

    /// Verbs for discovery.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.create_only {
            &["create"]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }
}

macro_rules! res {
    ($g:expr, $v:expr, $r:expr, $s:expr, $k:expr, $ns:expr, [$($sn:expr),*], [$($sub:expr),*], $gen:expr) => {
        ResourceDef { group: $g, version: $v, resource: $r, singular: $s, kind: $k, namespaced: $ns,
            short_names: &[$($sn),*], subresources: &[$($sub),*], generation: $gen, create_only: false, categories: &[] }
    };
}

/// A cluster-scoped v1 review kind: created only (answered, never stored), no short names, no
/// subresources.
macro_rules! review {
    ($g:expr, $r:expr, $s:expr, $k:expr) => {
        ResourceDef {
            create_only: true,
            ..res!($g, "v1", $r, $s, $k, false, [], [], false)
        }
    };
}

/// Every served resource. Names, kinds, short names and subresources follow
/// `kubectl api-resources` of kube-apiserver v1.33.
pub static RESOURCES: &[ResourceDef] = &[
    res!(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        ["ns"],
        ["status", "finalize"],
        false
    ),
    res!(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        ["no"],
        ["status"],
        false
    ),
    ResourceDef {
        categories: &["all"],
        ..res!(
            "",
            "v1",
            "pods",
            "pod",
            "Pod",
            true,
            ["po"],
            ["status", "eviction", "binding"],
            false
        )
    },
    ResourceDef {
        categories: &["all"],
        ..res!(
            "",
            "v1",
            "services",
            "service",
            "Service",
            true,
            ["svc"],
            ["status"],
            false
        )
    },
    res!(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        ["ep"],
        [],
        false
    ),
    res!(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        ["cm"],
        [],
        false
    ),
    res!("", "v1", "secrets", "secret", "Secret", true, [], [], false),
    res!(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        ["sa"],
        [],
        false
    ),
    res!(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        ["pvc"],
        ["status"],
        false
    ),
    res!(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        ["pv"],
        ["status"],
        false
    ),
    res!(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        ["ev"],
        [],
        false
    ),
    res!(
        "",
        "v1",
        "limitranges",
        "limitrange",
        "LimitRange",
        true,
        ["limits"],
        [],
        false
    ),
    res!(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        true,
        ["quota"],
        ["status"],
        false
    ),
    ResourceDef {
        categories: &["all"],
        ..res!(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            true,
            ["deploy"],
            ["status", "scale"],
            true
        )
    },
    ResourceDef {
        categories: &["all"],
        ..res!(
            "apps",
            "v1",
            "replicasets",
            "replicaset",
            "ReplicaSet",
            true,
            ["rs"],
            ["status", "scale"],
            true
        )
    },
    ResourceDef {
        categories: &["all"],
        ..res!(
            "apps",
            "v1",
            "statefulsets",
            "statefulset",
            "StatefulSet",
            true,
            ["sts"],
            ["status", "scale"],
            true
        )
    },
    ResourceDef {
        categories: &["all"],
        ..res!(
            "apps",
            "v1",
            "daemonsets",
            "daemonset",
            "DaemonSet",
            true,
            ["ds"],
            ["status"],
            true
        )
    },
    res!(
        "apps",
        "v1",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
        true,
        [],
        [],
        false
    ),
    ResourceDef {
        categories: &["all"],
        ..res!(
            "batch",
            "v1",
            "jobs",
            "job",
            "Job",
            true,
            [],
            ["status"],
            true
        )
    },
    ResourceDef {
        categories: &["all"],
        ..res!(
            "batch",
            "v1",
            "cronjobs",
            "cronjob",
            "CronJob",
            true,
            ["cj"],
            ["status"],
            true
        )
    },
    res!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        ["pdb"],
        ["status"],
        true
    ),
    res!(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        false,
        ["pc"],
        [],
        false
    ),
    res!(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        [],
        [],
        false
    ),
    res!(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        true,
        [],
        [],
        false
    ),
    res!(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
        false,
        [],
        [],
        true
    ),
    res!(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
        false,
        [],
        [],
        true
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        [],
        [],
        false
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        [],
        [],
        false
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        [],
        [],
        false
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        [],
        [],
        false
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        ["netpol"],
        [],
        true
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        ["ing"],
        ["status"],
        true
    ),
    res!(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        ["sc"],
        [],
        false
    ),
    ResourceDef {
        categories: &["all"],
        ..res!(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            "HorizontalPodAutoscaler",
            true,
            ["hpa"],
            ["status"],
            false
        )
    },
    // The kinds a stored CRD describes are served too: see `crate::crds`.
    res!(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        ["crd", "crds"],
        ["status"],
        true
    ),
    review!(
        "authentication.k8s.io",
        "tokenreviews",
        "tokenreview",
        "TokenReview"
    ),
    review!(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview"
    ),
    review!(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview"
    ),
];

/// Looks a resource up by group, version and plural name.
pub fn by_gvr(group: &str, version: &str, resource: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.group == group && d.version == version && d.resource == resource)
}

/// Looks a resource up by `apiVersion` and `kind` (the version is not compared, so
/// e.g. `policy/v1beta1` PodDisruptionBudgets load as `policy/v1`).
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    let group = match api_version.split_once('/') {
        Some((g, _)) => g,
        None => "",
    };
    RESOURCES
        .iter()
        .find(|d| d.group == group && d.kind == kind && !d.create_only)
}

/// Groups in discovery order with their single served version.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for d in RESOURCES {
        if !d.group.is_empty() && !out.iter().any(|(g, _)| *g == d.group) {
            out.push((d.group, d.version));
        }
    }
    out
}
