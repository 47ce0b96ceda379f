//! `/load_balancers`.

use std::net::IpAddr;

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::common::{ActionEnvelope, Created, push_filter, selector_from_labels};
use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{
    Action, Algorithm, AlgorithmSpec, AttachLbToNetworkRequest, CreateLoadBalancerRequest, Labels, LbService,
    LoadBalancer, LoadBalancerId, LoadBalancerListParams, NetworkId, TargetSpec, UpdateLoadBalancerRequest,
    UpdateServiceRequest,
};
use crate::paging::Page;

/// Load balancer endpoints.
#[derive(Debug, Clone, Copy)]
pub struct LoadBalancers<'a>(pub(crate) &'a Client);

#[derive(Deserialize)]
struct One {
    load_balancer: LoadBalancer,
}

#[derive(Deserialize)]
struct CreateAnswer {
    load_balancer: LoadBalancer,
    #[serde(default)]
    action: Option<Action>,
}

fn filters(params: &LoadBalancerListParams) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    push_filter(&mut q, "name", &params.name);
    push_filter(&mut q, "label_selector", &params.label_selector);
    q
}

impl LoadBalancers<'_> {
    /// `GET /load_balancers/{id}`.
    pub async fn get(&self, id: LoadBalancerId) -> Result<LoadBalancer, Error> {
        let one: One =
            self.0.json::<_, ()>(Method::GET, &Target::with_id("/load_balancers/{id}", id), &[], None).await?;
        Ok(one.load_balancer)
    }

    /// `GET /load_balancers` — one page.
    pub async fn list(
        &self,
        params: &LoadBalancerListParams,
        page: u32,
        per_page: u32,
    ) -> Result<Page<LoadBalancer>, Error> {
        self.0.page(&Target::fixed("/load_balancers"), "load_balancers", &filters(params), page, per_page).await
    }

    /// `GET /load_balancers` — every page.
    pub async fn list_all(&self, params: &LoadBalancerListParams) -> Result<Vec<LoadBalancer>, Error> {
        self.0.all(&Target::fixed("/load_balancers"), "load_balancers", &filters(params)).await
    }

    /// Every load balancer carrying all of `labels` (see [`selector_from_labels`]).
    pub async fn list_by_labels(&self, labels: &Labels) -> Result<Vec<LoadBalancer>, Error> {
        let params =
            LoadBalancerListParams { label_selector: Some(selector_from_labels(labels)?), ..Default::default() };
        self.list_all(&params).await
    }

    /// The load balancer with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<LoadBalancer>, Error> {
        let params = LoadBalancerListParams { name: Some(name.to_owned()), ..Default::default() };
        Ok(self.list(&params, 1, 1).await?.items.into_iter().find(|l| l.name == name))
    }

    /// `POST /load_balancers`. Never repeated once it may have been applied: see
    /// [`Error::OutcomeUnknown`]; look it up with [`LoadBalancers::list_by_labels`] then.
    pub async fn create(&self, req: &CreateLoadBalancerRequest) -> Result<Created<LoadBalancer>, Error> {
        let a: CreateAnswer = self.0.json(Method::POST, &Target::create("/load_balancers"), &[], Some(req)).await?;
        Ok(Created { resource: a.load_balancer, action: a.action, next_actions: Vec::new() })
    }

    /// `PUT /load_balancers/{id}` (name and/or labels).
    pub async fn update(&self, id: LoadBalancerId, req: &UpdateLoadBalancerRequest) -> Result<LoadBalancer, Error> {
        let one: One = self.0.json(Method::PUT, &Target::with_id("/load_balancers/{id}", id), &[], Some(req)).await?;
        Ok(one.load_balancer)
    }

    /// `DELETE /load_balancers/{id}`. The API used to answer `204`; today it answers `200`
    /// with a `delete_load_balancer` action, which this call waits for (up to the client's
    /// deadline). Also succeeds if a retry found the load balancer already gone.
    pub async fn delete(&self, id: LoadBalancerId) -> Result<(), Error> {
        if let Some(action) = self.0.delete(&Target::with_id("/load_balancers/{id}", id)).await? {
            self.0.wait_for_action(&action, self.0.deadline()).await?;
        }
        Ok(())
    }

    async fn action<B: Serialize + ?Sized>(
        &self,
        template: &'static str,
        id: LoadBalancerId,
        body: Option<&B>,
    ) -> Result<Action, Error> {
        let a: ActionEnvelope = self.0.json(Method::POST, &Target::with_id(template, id), &[], body).await?;
        Ok(a.action)
    }

    /// `add_service`.
    pub async fn add_service(&self, id: LoadBalancerId, service: &LbService) -> Result<Action, Error> {
        self.action("/load_balancers/{id}/actions/add_service", id, Some(service)).await
    }

    /// `update_service`.
    pub async fn update_service(&self, id: LoadBalancerId, req: &UpdateServiceRequest) -> Result<Action, Error> {
        self.action("/load_balancers/{id}/actions/update_service", id, Some(req)).await
    }

    /// `delete_service`.
    pub async fn delete_service(&self, id: LoadBalancerId, listen_port: u16) -> Result<Action, Error> {
        self.action(
            "/load_balancers/{id}/actions/delete_service",
            id,
            Some(&serde_json::json!({ "listen_port": listen_port })),
        )
        .await
    }

    /// `add_target` (server or IP).
    pub async fn add_target(&self, id: LoadBalancerId, target: &TargetSpec) -> Result<Action, Error> {
        self.action("/load_balancers/{id}/actions/add_target", id, Some(target)).await
    }

    /// `remove_target` (server, IP or label selector; `use_private_ip` is not part of the
    /// request: a target is identified by its server, IP or selector alone).
    pub async fn remove_target(&self, id: LoadBalancerId, target: &TargetSpec) -> Result<Action, Error> {
        let body = match target {
            TargetSpec::Server { id, .. } => serde_json::json!({ "type": "server", "server": { "id": id } }),
            TargetSpec::Ip(ip) => serde_json::json!({ "type": "ip", "ip": { "ip": ip } }),
            TargetSpec::LabelSelector { selector, .. } => {
                serde_json::json!({ "type": "label_selector", "label_selector": { "selector": selector } })
            }
        };
        self.action("/load_balancers/{id}/actions/remove_target", id, Some(&body)).await
    }

    /// `attach_to_network`.
    pub async fn attach_to_network(&self, id: LoadBalancerId, req: &AttachLbToNetworkRequest) -> Result<Action, Error> {
        self.action("/load_balancers/{id}/actions/attach_to_network", id, Some(req)).await
    }

    /// `detach_from_network`.
    pub async fn detach_from_network(&self, id: LoadBalancerId, network: NetworkId) -> Result<Action, Error> {
        self.action(
            "/load_balancers/{id}/actions/detach_from_network",
            id,
            Some(&serde_json::json!({ "network": network })),
        )
        .await
    }

    /// `change_type`.
    pub async fn change_type(&self, id: LoadBalancerId, load_balancer_type: &str) -> Result<Action, Error> {
        self.action(
            "/load_balancers/{id}/actions/change_type",
            id,
            Some(&serde_json::json!({ "load_balancer_type": load_balancer_type })),
        )
        .await
    }

    /// `change_algorithm`.
    pub async fn change_algorithm(&self, id: LoadBalancerId, algorithm: Algorithm) -> Result<Action, Error> {
        self.action("/load_balancers/{id}/actions/change_algorithm", id, Some(&AlgorithmSpec { kind: algorithm })).await
    }

    /// `enable_public_interface`.
    pub async fn enable_public_interface(&self, id: LoadBalancerId) -> Result<Action, Error> {
        self.action::<()>("/load_balancers/{id}/actions/enable_public_interface", id, None).await
    }

    /// `disable_public_interface`.
    pub async fn disable_public_interface(&self, id: LoadBalancerId) -> Result<Action, Error> {
        self.action::<()>("/load_balancers/{id}/actions/disable_public_interface", id, None).await
    }

    /// `change_dns_ptr` (`None` resets to the default PTR).
    pub async fn change_dns_ptr(&self, id: LoadBalancerId, ip: IpAddr, dns_ptr: Option<&str>) -> Result<Action, Error> {
        self.action(
            "/load_balancers/{id}/actions/change_dns_ptr",
            id,
            Some(&serde_json::json!({ "ip": ip, "dns_ptr": dns_ptr })),
        )
        .await
    }

    /// `change_protection`.
    pub async fn change_protection(&self, id: LoadBalancerId, delete: bool) -> Result<Action, Error> {
        self.action(
            "/load_balancers/{id}/actions/change_protection",
            id,
            Some(&serde_json::json!({ "delete": delete })),
        )
        .await
    }
}
