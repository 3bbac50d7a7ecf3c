//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager). Only the
//! leader runs the controller; a replica that loses the lease stops reconciling and the
//! process exits, so its restart rejoins as a follower with fresh caches.

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

pub const LEASE_NAME: &str = "mwrs-controller";

/// A held lease: `lost()` resolves when leadership ends.
pub struct Leadership {
    rx: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Waits until this replica holds the lease.
    pub async fn acquire(
        client: Client,
        namespace: &str,
        identity: &str,
    ) -> Result<Self, LeaseManagerError> {
        let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .with_field_manager(crate::FIELD_MANAGER)
            .build()
            .await?;
        let (mut rx, task) = manager.watch().await;
        while !*rx.borrow_and_update() {
            tracing::info!(identity, namespace, "waiting for leadership");
            if rx.changed().await.is_err() {
                break;
            }
        }
        tracing::info!(identity, namespace, "acquired leadership");
        Ok(Self { rx, task })
    }

    /// Gives the lease up so a standby takes over at once instead of after expiry: the
    /// manager releases it when its channel closes.
    pub async fn release(self) {
        let Self { rx, task } = self;
        drop(rx);
        match tokio::time::timeout(std::time::Duration::from_secs(5), task).await {
            Ok(Ok(Ok(_))) => tracing::info!("released leadership"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "cannot release the lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "lease task failed"),
            Err(_) => tracing::warn!("timed out releasing the lease"),
        }
    }

    /// Resolves when the lease is lost (or its manager stopped).
    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        let mut rx = self.rx.clone();
        async move {
            loop {
                if !*rx.borrow_and_update() {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}
