//! Deleting a Service's Load Balancer, and forgetting what was kept about it.

use cloud_provider::CloudError;
use cloud_provider::events::{EventObject, ProviderEvent};
use hcloud_api::ErrorCode;
use hcloud_api::models::LoadBalancer;
use k8s_openapi::api::core::v1::Service;
use tracing::{debug, info};

use super::{HcloudLoadBalancers, lookup_error};
use crate::api_error::api_error;

impl HcloudLoadBalancers {
    /// Deletes the Load Balancer of the Service `uid` (unless it is delete-protected). Once it
    /// is gone or kept, nothing is remembered about it or the Service: no uncertain create, no
    /// outstanding action or failure.
    pub(super) async fn delete(&self, svc: &Service, uid: &str, service: &str) -> Result<(), CloudError> {
        let lb = self.inventory.find_by_label(uid).await.map_err(|e| lookup_error(service, e))?;
        // Asked the API if a create was uncertain: whatever happens next, no create follows.
        self.inventory.forget_uncertain(uid);
        let Some(lb) = lb else {
            debug!(service, "no Load Balancer to delete");
            return Ok(());
        };
        let result = self.delete_found(svc, &lb, service).await;
        if result.is_ok() {
            // Deleted, or kept for its protection and no longer the Service's.
            self.tracker.forget(lb.id);
        }
        result
    }

    async fn delete_found(&self, svc: &Service, lb: &LoadBalancer, service: &str) -> Result<(), CloudError> {
        let protected = |lb: &LoadBalancer| {
            self.publish(ProviderEvent::warning(
                EventObject::service(svc),
                "LoadBalancerDeletionProtected",
                format!(
                    "Load Balancer {} ({}) has delete protection and is kept; remove the protection and delete it \
                     yourself if it is no longer needed",
                    lb.name, lb.id
                ),
            ));
        };
        if lb.protection.delete {
            info!(service, load_balancer = %lb.id, "ignored: load balancer deletion protected");
            protected(lb);
            return Ok(());
        }
        if let Err(e) = self.tracker.wait_for(lb.id, tokio::time::Instant::now()).await {
            debug!(load_balancer = %lb.id, error = %e, "an earlier action failed; deleting anyway");
        }
        info!(service, load_balancer = %lb.id, name = %lb.name, "deleting Load Balancer");
        match self.client.load_balancers().delete(lb.id).await {
            Ok(()) => {
                self.inventory.remove(lb.id);
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                self.inventory.remove(lb.id);
                Ok(())
            }
            Err(e) if e.code() == Some(&ErrorCode::Protected) => {
                self.inventory.mark_stale(lb.id);
                protected(lb);
                Ok(())
            }
            Err(e) => {
                self.inventory.mark_stale(lb.id);
                Err(api_error(&format!("Service {service}: deleting Load Balancer {} ({})", lb.name, lb.id), e))
            }
        }
    }
}
