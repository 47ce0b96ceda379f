//! Adopting the Load Balancer named like the Service's (the official CCM's upgrade path).

use cloud_provider::CloudError;
use hcloud_api::models::LoadBalancer;
use tracing::{info, warn};

use super::{HcloudLoadBalancers, OWNED_ELSEWHERE};
use crate::api_error::api_error;
use crate::load_balancers::lb_inventory::Found;
use crate::load_balancers::plan::{OwnedElsewhere, check_adoption, decide_adoption};
use crate::load_balancers::spec::LbSpec;

fn owned_elsewhere(service: &str, e: OwnedElsewhere) -> CloudError {
    warn!(service, load_balancer = %e.id, owner = %e.owner, "not adopting a Load Balancer labelled for someone else");
    CloudError::failed(OWNED_ELSEWHERE, format!("Service {service}: {e}"))
}

impl HcloudLoadBalancers {
    /// What the Service finds when the shared list shows `cached` under its Load Balancer's
    /// name and nothing with its label. Adopting writes the labels it read (`PUT`), so the
    /// decision is taken on one fresh `GET` of that Load Balancer, never on the list, which may
    /// be up to `HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE` old: an owner label set meanwhile refuses
    /// it, other labels set meanwhile are kept. One the list already shows labelled for someone
    /// else is refused without a request (refusing on old data sends nothing). Gone or renamed
    /// meanwhile: [`Found::None`].
    pub(super) async fn adoptable(&self, cached: &LoadBalancer, spec: &LbSpec) -> Result<Found, CloudError> {
        let service = spec.service.as_str();
        check_adoption(cached, &spec.uid).map_err(|e| owned_elsewhere(service, e))?;
        let fresh = self.inventory.reload(cached.id).await.map_err(|e| {
            api_error(
                &format!("Service {service}: reading Load Balancer {} ({}) to adopt it", cached.name, cached.id),
                e,
            )
        })?;
        match decide_adoption(fresh, &spec.name, &spec.uid) {
            Ok(Some(lb)) => {
                info!(service, load_balancer = %lb.id, name = %lb.name, "adopting the Load Balancer with this Service's name");
                Ok(Found::ByName(lb))
            }
            Ok(None) => {
                info!(service, load_balancer = %cached.id, "the Load Balancer to adopt is gone or renamed; looking no further");
                Ok(Found::None)
            }
            Err(e) => Err(owned_elsewhere(service, e)),
        }
    }
}
