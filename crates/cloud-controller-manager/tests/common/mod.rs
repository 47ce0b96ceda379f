//! What the manager tests share: a minimal in-memory provider with load balancers only, the
//! flags parser and the identity.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use clap::Parser;
use cloud_controller_manager::{Identity, ManagerArgs, Options};
use cloud_provider::{
    Cloud, CloudError, LoadBalancer, LoadBalancerIngress, LoadBalancerStatus, Unsupported, default_load_balancer_name,
};
use k8s_openapi::api::core::v1::{Node, Service};
use test_harness::ControlPlane;

pub const PATIENCE: Duration = Duration::from_secs(30);
pub const IP: &str = "192.0.2.50";

/// Load balancers by name, with the hosts each got.
#[derive(Default)]
pub struct Balancers {
    hosts: Mutex<BTreeMap<String, Vec<String>>>,
    /// How many of the next [`LoadBalancer::node_label_keys`] calls panic, as a provider with
    /// a bug would.
    pub label_keys_panics: AtomicU32,
}

impl Balancers {
    /// The load balancers by name, with their hosts.
    pub fn get(&self) -> BTreeMap<String, Vec<String>> {
        self.hosts.lock_unpoisoned().clone()
    }
}

impl LoadBalancer for Balancers {
    async fn get_load_balancer(&self, _: &str, svc: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        Ok(self.get().contains_key(&default_load_balancer_name(svc)).then(status))
    }
    fn get_load_balancer_name(&self, _: &str, svc: &Service) -> String {
        default_load_balancer_name(svc)
    }
    async fn ensure_load_balancer(
        &self,
        _: &str,
        svc: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let hosts = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        self.hosts.lock_unpoisoned().insert(default_load_balancer_name(svc), hosts);
        Ok(status())
    }
    async fn update_load_balancer(&self, _: &str, svc: &Service, nodes: &[Node]) -> Result<(), CloudError> {
        self.ensure_load_balancer("", svc, nodes).await.map(|_| ())
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, svc: &Service) -> Result<(), CloudError> {
        self.hosts.lock_unpoisoned().remove(&default_load_balancer_name(svc));
        Ok(())
    }
    fn node_label_keys(&self, _: &Service) -> Vec<String> {
        if self.label_keys_panics.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
            panic!("the provider's node_label_keys hit a bug");
        }
        Vec::new()
    }
}

pub fn status() -> LoadBalancerStatus {
    LoadBalancerStatus { ingress: vec![LoadBalancerIngress { ip: Some(IP.to_owned()), ..Default::default() }] }
}

/// A provider with load balancers only.
pub struct LbOnly(pub Arc<Balancers>);

impl Cloud for LbOnly {
    type InstancesV2 = Unsupported;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = Balancers;
    type Routes = Unsupported;
    fn provider_name(&self) -> &str {
        "test"
    }
    fn has_cluster_id(&self) -> bool {
        false
    }
    fn instances_v2(&self) -> Option<Arc<Unsupported>> {
        None
    }
    fn instances(&self) -> Option<Arc<Unsupported>> {
        None
    }
    fn zones(&self) -> Option<Arc<Unsupported>> {
        None
    }
    fn load_balancer(&self) -> Option<Arc<Balancers>> {
        Some(self.0.clone())
    }
    fn routes(&self) -> Option<Arc<Unsupported>> {
        None
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

pub const IDENTITY: Identity = Identity { program: "test-ccm", version: "0", field_manager: "test-ccm" };

/// Validated options for a manager against `cp` as the CCM's RBAC-restricted user, without
/// leader election or secure port, plus `extra` flags.
pub fn options(cp: &ControlPlane, extra: &[&str]) -> Options {
    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let mut args = vec![
        "test-ccm",
        "--cloud-provider=test",
        "--allow-untagged-cloud",
        "--leader-elect=false",
        "--secure-port=0",
        &kubeconfig,
    ];
    args.extend_from_slice(extra);
    Cli::try_parse_from(args).expect("flags").manager.validate("test").expect("valid")
}
