//! RemovePodsViolatingInterPodAntiAffinity args: the type (upstream
//! `RemovePodsViolatingInterPodAntiAffinityArgs`), decoding and validation.

use super::RemovePodsViolatingInterPodAntiAffinity;
use crate::framework::args::{ArgsError, selecting_args};
use crate::framework::podfilter::PodFilter;

selecting_args! {
    /// Args (upstream `RemovePodsViolatingInterPodAntiAffinityArgs`).
    pub struct Args {
        namespaces,
        label_selector,
    }
}

impl RemovePodsViolatingInterPodAntiAffinity {
    /// Validates `args` (namespaces include/exclude exclusive, a valid label selector).
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        Ok(RemovePodsViolatingInterPodAntiAffinity { filter })
    }
}
