//! Shared Load Balancers (`sharing-key`): finding a group's Load Balancer and leaving groups,
//! the I/O around the pure [`crate::load_balancers::sharing`].

use std::sync::Arc;

use cloud_provider::CloudError;
use cloud_provider::events::{EventObject, ProviderEvent};
use cloud_provider::helpers::label_selector::is_name_segment;
use hcloud_api::models::LoadBalancer;
use k8s_openapi::api::core::v1::Service;
use sync_lock::Unpoison as _;
use tracing::info;

use super::{HcloudLoadBalancers, INVALID, lookup_error};
use crate::api_error::api_error;
use crate::load_balancers::plan::Plan;
use crate::load_balancers::release_plan::keep_foreign_on_delete;
use crate::load_balancers::sharing::{After, Group, Leave, group_of, is_member, plan_leave};

/// The reason of the Normal event on a Service that left a shared Load Balancer.
const LEFT: &str = "LeftSharedLoadBalancer";

/// The Load Balancers a shared sync works with.
pub(super) struct GroupLbs {
    /// The group's Load Balancer, if it has one.
    pub group: Option<Arc<LoadBalancer>>,
    /// The Service's own Load Balancer (identity label), if it has one: it becomes the group's
    /// when the group has none, else it is deleted once the Service has joined.
    pub dedicated: Option<Arc<LoadBalancer>>,
}

impl HcloudLoadBalancers {
    /// The lock of `group`: each member's sync plans on the labels the one before wrote.
    pub(super) fn group_lock(&self, group: &Group) -> Arc<tokio::sync::Mutex<()>> {
        self.group_locks.lock_unpoisoned().entry(group.clone()).or_default().clone()
    }

    /// The group's Load Balancer (found by its labels, never by name) and the Service's own.
    pub(super) async fn find_group(
        &self,
        group: &Group,
        cluster: &str,
        uid: &str,
        service: &str,
    ) -> Result<GroupLbs, CloudError> {
        if !is_name_segment(cluster) {
            return Err(CloudError::failed(
                INVALID,
                format!(
                    "Service {service}: a shared Load Balancer is labelled with the cluster's name, and \
                     --cluster-name={cluster:?} is not a label value (1 to 63 letters, digits, '-', '_' or '.')"
                ),
            ));
        }
        let found =
            self.inventory.matching(|lb| group.owns(lb, cluster)).await.map_err(|e| {
                api_error(&format!("Service {service}: looking up the Load Balancer of its {group}"), e)
            })?;
        if found.len() > 1 {
            let ids: Vec<String> = found.iter().map(|lb| lb.id.to_string()).collect();
            return Err(CloudError::failed(
                "NonUniqueLoadBalancer",
                format!(
                    "Service {service}: {} Load Balancers carry the labels of its {group} ({}); a group has exactly \
                     one — delete or relabel the extra ones",
                    found.len(),
                    ids.join(", ")
                ),
            ));
        }
        let dedicated = self.inventory.find_by_label(uid).await.map_err(|e| lookup_error(service, e))?;
        Ok(GroupLbs { group: found.into_iter().next(), dedicated })
    }

    /// Takes the Service `uid` out of every group it is a member of but `except`, then `after`.
    /// Each group's lock is held while its Load Balancer is changed.
    pub(super) async fn leave_groups(
        &self,
        svc: &Service,
        uid: &str,
        cluster: &str,
        except: Option<&Group>,
        after: After,
    ) -> Result<(), CloudError> {
        let service = cloud_provider::helpers::service::service_name(svc);
        let member_of = self
            .inventory
            .matching(|lb| is_member(lb, uid))
            .await
            .map_err(|e| api_error(&format!("Service {service}: looking up its shared Load Balancers"), e))?;
        for lb in member_of {
            let group = group_of(&lb, cluster);
            if group.is_some() && group.as_ref() == except {
                continue;
            }
            let lock = group.as_ref().map(|g| self.group_lock(g));
            let _turn = match &lock {
                Some(l) => Some(l.lock().await),
                None => None,
            };
            // Planned on what the previous holder of the lock left.
            let current = self
                .inventory
                .get(lb.id)
                .await
                .map_err(|e| api_error(&format!("Service {service}: reading Load Balancer {}", lb.id), e))?;
            let Some(lb) = current.filter(|lb| is_member(lb, uid)) else { continue };
            let keep_foreign = keep_foreign_on_delete(svc.metadata.annotations.as_ref(), self.defaults.keep_foreign);
            let owner = EventObject::service(svc);
            match plan_leave(&lb, uid, after, keep_foreign) {
                Leave::Delete => {
                    info!(service = %service, load_balancer = %lb.id, "the last member left; deleting the shared Load Balancer");
                    self.delete_found(svc, &lb, &service).await?;
                }
                Leave::Ops(ops) => {
                    let plan = Plan { ops, max_targets_reached: Vec::new() };
                    self.execute(&lb, plan, &owner, &[], &mut Vec::new(), tokio::time::Instant::now()).await?;
                    let what = match after {
                        After::OwnLoadBalancer => "it keeps a Load Balancer of its own",
                        After::Nothing => "it needs none",
                    };
                    self.publish(ProviderEvent::normal(
                        owner,
                        LEFT,
                        format!(
                            "left the shared Load Balancer {} ({}); its services on it were removed, and {what}",
                            lb.name, lb.id
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
