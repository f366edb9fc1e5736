//! An out-of-tree kube-descheduler build: the stock registry plus
//! - [`retire_nodes::RetireNodes`] (Deschedule): drains nodes that a label marks for retirement
//!   (a node-pool upgrade, a hardware refresh), a batch of nodes per cycle, the emptiest first;
//! - [`min_age_evictor::MinAgeEvictor`] (an evictor, next to the DefaultEvictor): never evicts a
//!   pod younger than `minPodAge` or one carrying an opt-out label.
//!
//! Everything it uses comes from [`kube_descheduler::plugin`], the crate's stable plugin API.

pub mod min_age_evictor;
pub mod retire_nodes;

use kube_descheduler::plugin::{Registry, RegistryError};

/// The built-in plugins and the DefaultEvictor, plus this crate's plugin and evictor.
pub fn registry() -> Result<Registry, RegistryError> {
    Registry::builtin()
        .with(retire_nodes::factory())?
        .with(min_age_evictor::factory())
}

#[cfg(test)]
mod tests {
    #[test]
    fn registers_beside_the_builtins_and_only_once() {
        let r = super::registry().expect("names are free");
        assert!(r.plugin(super::retire_nodes::NAME).is_some());
        assert!(r.evictor(super::min_age_evictor::NAME).is_some());
        assert!(r.evictor("DefaultEvictor").is_some());
        let again = r.with(super::retire_nodes::factory());
        assert!(again.is_err(), "a second RetireNodes must be refused");
    }
}
