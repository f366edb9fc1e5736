//! RemovePodsViolatingInterPodAntiAffinity args: the type (upstream
//! `RemovePodsViolatingInterPodAntiAffinityArgs`), decoding and validation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use super::RemovePodsViolatingInterPodAntiAffinity;
use crate::framework::Plugin;
use crate::framework::args::{self, ArgsError, Namespaces};
use crate::framework::podfilter::PodFilter;

/// Args (upstream `RemovePodsViolatingInterPodAntiAffinityArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Only (or all but) these namespaces.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching this selector.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

pub(super) fn build(raw: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let a: Args = args::decode(raw)?;
    Ok(Plugin::Deschedule(Box::new(
        RemovePodsViolatingInterPodAntiAffinity::new(a)?,
    )))
}

impl RemovePodsViolatingInterPodAntiAffinity {
    /// Validates `args` (namespaces include/exclude exclusive, a valid label selector).
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        Ok(RemovePodsViolatingInterPodAntiAffinity { filter })
    }
}
