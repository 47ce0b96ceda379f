//! Load balancers: create/update/delete, services, targets, networks, type, algorithm,
//! public interface, reverse DNS, protection, rendering and listing.
//!
//! Rules enforced (codes and statuses as in [`crate::error`]):
//! - listen ports are unique per load balancer (`source_port_already_used`);
//! - `max_services` / `max_targets` of the type (`resource_limit_exceeded`); a label selector
//!   target counts as the number of servers it matches (at least one);
//! - a duplicate target is `target_already_defined`;
//! - server targets with `use_private_ip` need the load balancer attached to a network
//!   (`load_balancer_not_attached_to_network`) that the server is attached to as well
//!   (`server_not_attached_to_network`); public server targets need a public interface
//!   (`load_balancer_public_interface_disabled`) and a public IPv4 on the server (`missing_ipv4`);
//! - IP targets may not be addresses of fake resources (`cloud_resource_ip_not_allowed`);
//! - attaching to a network twice is `load_balancer_already_attached`, detaching from a
//!   network it is not in is `load_balancer_not_attached_to_network`;
//! - a type change below current usage is `invalid_load_balancer_type`;
//! - a type past its `unavailable_after` cannot be ordered (create, type change): `invalid_input`;
//! - `DELETE` with delete protection is `protected`;
//! - removing a target or updating/deleting a service that does not exist is `not_found`.
//!
//! Service defaults on `add_service` (and `services` on create): listen port 80/443 for
//! http/https (required for tcp), destination port 80 for http/https (required for tcp),
//! `proxyprotocol` false, `http` {cookie `HCLBSTICKY`, lifetime 300, no certificates, no
//! redirect, no sticky sessions} for http/https only, health check {protocol `tcp`, port =
//! destination port, interval 15, timeout 10, retries 3}, and for `http` health checks
//! {domain null, path `/`, response "", status codes `2??`,`3??`, tls false}.
//!
//!
//! The code is split by concern: [`lifecycle`] (create, seed, update, delete and the helpers
//! every action uses), [`services`], [`targets`], [`networks`] (attach/detach and private
//! interfaces), [`settings`] (type, algorithm, public interface, reverse DNS, protection) and
//! [`render`] (the served shape and listing), [`types`] (the types as served, with test-set
//! deprecations).

mod lifecycle;
mod networks;
mod render;
mod services;
mod settings;
mod targets;
mod types;

pub(crate) use render::LoadBalancerFilter;
