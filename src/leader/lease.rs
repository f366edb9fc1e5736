//! Access to the coordination.k8s.io/v1 Lease used as the lock: get, create, replace (with the
//! read `resourceVersion`, so a concurrent writer makes it fail with 409).

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};

/// Why a Lease call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// 409: someone else wrote the Lease first (lost the race).
    #[error("conflict: the lease was changed by someone else")]
    Conflict,
    /// Any other failure.
    #[error("{0}")]
    Other(String),
}

/// The Lease calls the elector makes.
pub trait LeaseApi: Send + Sync {
    /// Reads the Lease (None: it does not exist).
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaseError>>;
    /// Creates it.
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>>;
    /// Replaces it; `lease.metadata.resourceVersion` must be the one read.
    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>>;
}

/// [`LeaseApi`] on a cluster: `get`, `create`, `update` on `leases` in group coordination.k8s.io.
pub struct KubeLeaseApi {
    api: Api<Lease>,
    name: String,
}

impl KubeLeaseApi {
    /// The Lease `namespace/name`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        KubeLeaseApi {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

fn map_err(e: kube::Error) -> LeaseError {
    match &e {
        kube::Error::Api(s) if s.code == 409 => LeaseError::Conflict,
        _ => LeaseError::Other(e.to_string()),
    }
}

impl LeaseApi for KubeLeaseApi {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaseError>> {
        Box::pin(async move { self.api.get_opt(&self.name).await.map_err(map_err) })
    }
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>> {
        Box::pin(async move {
            self.api
                .create(&PostParams::default(), &lease)
                .await
                .map_err(map_err)
        })
    }
    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>> {
        Box::pin(async move {
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
                .map_err(map_err)
        })
    }
}
