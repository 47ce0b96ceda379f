//! `--dry-run` on the Hetzner side: every Cloud API write is reported to the manager's
//! [`DryRun`] and not sent (reads go out as usual). The generic part, Kubernetes writes with
//! `dryRun=All` and no leader election, is `cloud_controller_manager::dry_run`.

use std::sync::Arc;

use cloud_controller_manager::{DryRun, PlannedWrite};
use hcloud_provider::{WriteGate, WriteRequest};

/// The `api` label of Cloud API writes.
pub const API: &str = "hcloud";

/// Why a write was not sent, as the controller that asked for it sees it.
pub const REASON: &str = "dry run (--dry-run): not sent";

/// The controller a Cloud API write is made for, by its endpoint template: Load Balancers and
/// their certificates are the service controller's, network routes the route controller's.
pub fn controller_of(endpoint: &str) -> &'static str {
    if endpoint.starts_with("/load_balancers") || endpoint.starts_with("/certificates") {
        "service-lb-controller"
    } else if endpoint.starts_with("/networks") {
        "node-route-controller"
    } else {
        "cloud-provider"
    }
}

/// The planned write a refused request is.
pub fn planned(write: &WriteRequest<'_>) -> PlannedWrite {
    PlannedWrite {
        api: API.to_owned(),
        controller: controller_of(write.endpoint).to_owned(),
        verb: write.method.to_string(),
        kind: write.endpoint.to_owned(),
        target: write.path.to_owned(),
    }
}

/// The write gate of a dry run: records each write in `dry_run` and refuses it.
pub fn write_gate(dry_run: DryRun) -> WriteGate {
    Arc::new(move |write: &WriteRequest<'_>| {
        dry_run.record(planned(write));
        Err(REASON.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_attributed_to_their_controller() {
        assert_eq!(controller_of("/load_balancers/{id}/actions/add_target"), "service-lb-controller");
        assert_eq!(controller_of("/load_balancers"), "service-lb-controller");
        assert_eq!(controller_of("/certificates"), "service-lb-controller");
        assert_eq!(controller_of("/networks/{id}/actions/add_route"), "node-route-controller");
        assert_eq!(controller_of("/servers/{id}"), "cloud-provider");
    }

    #[test]
    fn the_gate_refuses_and_records_each_write_once() {
        let dry = DryRun::default();
        let gate = write_gate(dry.clone());
        let method = hcloud_api::Method::POST;
        let w = WriteRequest {
            method: &method,
            endpoint: "/networks/{id}/actions/add_route",
            path: "/networks/7/actions/add_route",
        };
        assert_eq!(gate(&w), Err(REASON.to_owned()));
        assert_eq!(gate(&w), Err(REASON.to_owned()));
        assert_eq!(
            dry.planned(),
            [PlannedWrite {
                api: "hcloud".to_owned(),
                controller: "node-route-controller".to_owned(),
                verb: "POST".to_owned(),
                kind: "/networks/{id}/actions/add_route".to_owned(),
                target: "/networks/7/actions/add_route".to_owned(),
            }]
        );
    }
}
