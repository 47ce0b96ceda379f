//! Deleting a Service's Load Balancer (or, with `keep-foreign`, releasing one that has foreign
//! parts), and forgetting what was kept about it.

use std::sync::Arc;

use cloud_provider::CloudError;
use cloud_provider::events::{EventObject, ProviderEvent};
use hcloud_api::ErrorCode;
use hcloud_api::models::LoadBalancer;
use k8s_openapi::api::core::v1::Service;
use tracing::{debug, info};

use super::{HcloudLoadBalancers, lookup_error};
use crate::api_error::api_error;
use crate::load_balancers::annotations::LABEL_SERVICE_UID;
use crate::load_balancers::plan::Plan;
use crate::load_balancers::release_plan::{Deletion, Release, keep_foreign_on_delete, plan_deletion};

/// The reason of the Normal event on a Service whose Load Balancer is kept for foreign parts.
const KEPT_FOR_FOREIGN_PARTS: &str = "LoadBalancerKeptForForeignParts";

impl HcloudLoadBalancers {
    /// Deletes the Load Balancer of the Service `uid` (unless it is delete-protected, or has
    /// foreign parts with `keep-foreign`: then only the Service's parts and label go). Once it
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
        let result = self.delete_or_release(svc, lb.clone(), service).await;
        if result.is_ok() {
            // Deleted, or kept for its protection and no longer the Service's.
            self.tracker.forget(lb.id);
        }
        result
    }

    /// With `keep-foreign`, a Load Balancer with foreign parts is released; one the cached list
    /// shows without any is read again first (one `GET`, only then): parts added by hand since
    /// the list was read must not be deleted with it.
    async fn delete_or_release(&self, svc: &Service, lb: Arc<LoadBalancer>, service: &str) -> Result<(), CloudError> {
        let keep_foreign = keep_foreign_on_delete(svc.metadata.annotations.as_ref(), self.defaults.keep_foreign);
        let mut lb = lb;
        let mut plan = plan_deletion(&lb, keep_foreign);
        if keep_foreign && plan == Deletion::Delete {
            let uid = svc.metadata.uid.as_deref().unwrap_or_default();
            match self.inventory.reload(lb.id).await {
                Ok(Some(fresh)) if fresh.labels.get(LABEL_SERVICE_UID).map(String::as_str) == Some(uid) => {
                    plan = plan_deletion(&fresh, keep_foreign);
                    lb = fresh;
                }
                // Gone, or no longer the Service's: nothing to delete.
                Ok(_) => return Ok(()),
                Err(e) => {
                    let what =
                        format!("Service {service}: reading Load Balancer {} ({}) before deleting it", lb.name, lb.id);
                    return Err(api_error(&what, e));
                }
            }
        }
        match plan {
            Deletion::Delete => self.delete_found(svc, &lb, service).await,
            Deletion::Release(release) => self.release(svc, &lb, release, service).await,
        }
    }

    /// Removes the Service's services and targets from `lb`, then its identity label and
    /// record, and says so in a Normal event on the Service.
    async fn release(
        &self,
        svc: &Service,
        lb: &LoadBalancer,
        release: Release,
        service: &str,
    ) -> Result<(), CloudError> {
        let owner = EventObject::service(svc);
        info!(service, load_balancer = %lb.id, foreign_ports = ?release.foreign_ports, foreign_targets = release.foreign_targets,
              "keeping the Load Balancer for its foreign parts; removing this Service's");
        let message = release.message(lb);
        let plan = Plan { ops: release.ops, max_targets_reached: Vec::new() };
        self.execute(lb, plan, &owner, &[], &mut Vec::new(), tokio::time::Instant::now()).await?;
        self.publish(ProviderEvent::normal(owner, KEPT_FOR_FOREIGN_PARTS, message));
        Ok(())
    }

    pub(super) async fn delete_found(&self, svc: &Service, lb: &LoadBalancer, service: &str) -> Result<(), CloudError> {
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
