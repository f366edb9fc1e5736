//! The cluster as this process sees it: the client configuration and client every command uses
//! ([`client`]), and the compact cluster state kept current by list+watch ([`state`], [`watch`],
//! [`kinds`]) that `run` watches and `plan --kubeconfig` reads once ([`read_once`]).

pub mod client;
pub mod kinds;
mod pod_store;
pub mod read_once;
pub mod state;
pub mod watch;
