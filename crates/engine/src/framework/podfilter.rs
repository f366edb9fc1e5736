//! The namespace and label-selector pod filter most plugins share (upstream `podutil.Options`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Selector, SelectorExt};

use super::args::{ArgsError, Namespaces};
use crate::scheduling::selector;
use crate::snapshot::Pod;

/// Namespaces include/exclude plus a label selector.
#[derive(Debug, Clone, Default)]
pub struct PodFilter {
    namespaces: Option<Namespaces>,
    selector: Option<Selector>,
}

impl PodFilter {
    /// Validates and compiles `namespaces` and `labelSelector` args.
    pub fn new(
        namespaces: Option<Namespaces>,
        label_selector: Option<&LabelSelector>,
    ) -> Result<Self, ArgsError> {
        if let Some(ns) = &namespaces {
            ns.validate("namespaces")?;
        }
        let selector = label_selector
            .map(selector::compile_strict)
            .transpose()
            .map_err(|e| {
                ArgsError::new(
                    "labelSelector",
                    format!("failed to get label selectors from strategy's params: {e}"),
                )
            })?;
        Ok(PodFilter {
            namespaces,
            selector,
        })
    }

    /// Whether `pod` passes the namespace and label filters.
    pub fn matches(&self, pod: &Pod) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|n| n.allows(&pod.namespace))
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&pod.labels))
    }
}
