//! Which Load Balancer a sync works on and of which type: the I/O around
//! [`crate::load_balancers::type_choice`].

use std::sync::Arc;

use cloud_provider::CloudError;
use hcloud_api::models::LoadBalancer;
use k8s_openapi::jiff::Timestamp;

use super::{HcloudLoadBalancers, INVALID, Target, catalog_error};
use crate::load_balancers::catalog::CatalogError;
use crate::load_balancers::spec::LbSpec;
use crate::load_balancers::type_choice::{Warning, needs_type_list, type_for_existing, type_for_new};

impl HcloudLoadBalancers {
    /// The Load Balancer to sync, `existing` or a new one, with the type it changes to or is
    /// created with, and the Warnings about that type; the type list is read (cached) only where
    /// it is needed ([`needs_type_list`]). Refused, with nothing sent, when the type does not
    /// exist or can no longer be ordered.
    pub(super) async fn choose_type(
        &self,
        spec: &LbSpec,
        existing: Option<Arc<LoadBalancer>>,
    ) -> Result<(Target, Vec<Warning>), CloudError> {
        let service = &spec.service;
        let configured = spec.lb_type.as_deref();
        let types = if needs_type_list(configured, existing.is_some()) {
            self.catalog.types().await.map_err(|e| catalog_error(service, e))?
        } else {
            Arc::default()
        };
        let now = Timestamp::now();
        match existing {
            Some(lb) => {
                let (change, warnings) = type_for_existing(configured, &types, &lb.load_balancer_type, now)
                    .map_err(|inv| catalog_error(service, CatalogError::Invalid(inv)))?;
                Ok((Target::Existing { lb, change }, warnings))
            }
            None => {
                let (t, warnings) = type_for_new(configured, &types, now).map_err(|inv| {
                    CloudError::failed(
                        INVALID,
                        format!("Service {service} cannot get a new Load Balancer, nothing was created: {inv}"),
                    )
                })?;
                Ok((Target::New(t), warnings))
            }
        }
    }
}
