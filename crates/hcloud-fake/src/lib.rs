//! An in-memory, stateful fake of the Hetzner Cloud API (`https://api.hetzner.cloud/v1`)
//! for tests, benchmarks and the local sandbox, where the real API is unreachable.
//!
//! It serves the subset hcloud-ccm uses — servers, networks (routes), load balancers
//! (services, targets, networks), certificates, primary IPs, actions, locations, server types
//! and load balancer types — and what Hetzner's `hcloud` CLI needs around it to manage them
//! (system images, prices, subnets, names and labels by `PUT`, protection, power actions,
//! reverse DNS; the CLI runs against the fake in `tests/hcloud_cli.rs`) — as the API is today:
//! the JSON shapes of the OpenAPI description ([`wire`], independent of the project's client
//! crate) plus the changes the API made since
//! (server type `locations[].available`/`recommended`, `timeout_idle`, primary IP
//! `assignee_type`, no `datacenter`, `/datacenters` answering `410`, load balancer deletion
//! answering an action), its error envelope and status codes ([`error`]), pagination, sorting,
//! label selectors, rate limiting, actions that progress over a configurable delay and are pruned
//! later, `locked` resources and `conflict` on busy networks. A test-control surface ([`control`],
//! [`FakeHandle`], HTTP under `/_fake`) seeds state, injects faults and reads counters.
//!
//! The same server also fakes the part of the Robot webservice (dedicated servers) the CCM
//! uses, under `/robot` with its own wire format, basic auth and faults ([`robot`]).
//!
//! Opt-in, the fake's Load Balancers also carry traffic ([`data_plane`], enabled with
//! [`FakeConfig::with_load_balancer_data_plane`] or `--load-balancer-data-plane`): their
//! public IPv4 comes from a loopback range (or local addresses), every service listens on
//! `<public IPv4>:<listen_port>` and forwards TCP connections to healthy targets, and target
//! health comes from real health checks. Off (the default), the fake is a pure API fake that
//! binds nothing but its own listener.
//!
//! # How a request flows
//!
//! 1. **Settle**: actions whose delay has passed finish; their effects (status changes,
//!    attach/detach, deletions, ...) apply now, or are discarded for injected failures
//!    (module `state`). There is no background timer: every request and library call settles
//!    (with the opt-in data plane, its reconciler also settles every pass, and every request
//!    wakes it to follow the change: listeners and health checkers follow the state).
//! 2. **Authentication**: `/v1` needs `Authorization: Bearer <token>` accepted by the
//!    [`TokenPolicy`]; otherwise `401 unauthorized`.
//! 3. **Rate limit**: one token from the bucket ([`rate_limit`]); empty means
//!    `429 rate_limit_exceeded`.
//! 4. **Fault injection**: the first matching [`FaultRule`] adds latency and/or answers
//!    instead of the handler ([`faults`]): the API's JSON error (`locked`, `conflict`, any
//!    code), a proxy's `text/html` 5xx page, or a TCP reset before the answer or in the
//!    middle of its body; with `apply` the handler runs first, so the change takes effect
//!    while the answer is lost.
//! 5. **Handler**: parses the body/query ([`query`], [`pagination`], [`sort`], [`label_selector`]),
//!    then validates and mutates the state under one lock and renders wire types.
//! 6. **Counters and log**: `RateLimit-*` and `X-Correlation-Id` headers are added, the
//!    request is counted per endpoint template and logged ([`control::RequestRecord`], with
//!    the [`token_fingerprint`] of its bearer token so two clients can be told apart), and
//!    one `tracing` line is emitted.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), hcloud_fake::FakeError> {
//! use hcloud_fake::{FakeConfig, FakeServer, control::{SeedNetwork, SeedServer}};
//!
//! let fake = FakeServer::start(FakeConfig::default()).await?; // 127.0.0.1, ephemeral port
//! let h = fake.handle();
//! let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central"))?;
//! let _srv = h.seed_server(&SeedServer::new("node-1").network(net))?;
//! println!("HCLOUD_ENDPOINT={}", fake.base_url()); // http://127.0.0.1:PORT/v1
//! assert_eq!(h.request_count("GET /v1/servers"), 0);
//! fake.shutdown().await;
//! # Ok(()) }
//! ```

mod catalog;
pub mod config;
pub mod control;
pub mod data_plane;
pub mod error;
pub mod faults;
mod handle;
pub mod http;
pub mod label_selector;
pub mod metrics;
pub mod pagination;
mod project_handles;
pub mod projects;
pub mod query;
pub mod rate_limit;
pub mod robot;
mod server;
pub mod sort;
mod state;
mod time;
pub mod wire;
mod x509;

pub use config::{FakeConfig, TokenPolicy};
pub use control::token_fingerprint;
pub use data_plane::{DataPlaneConfig, DataPlaneConfigError, ProxyProtocolVersion};
pub use error::{ApiError, FakeError};
pub use faults::{FaultRule, InjectedError, ResetPoint};
pub use handle::FakeHandle;
pub use projects::{DEFAULT_PROJECT, SeedProject};
pub use rate_limit::RateLimitConfig;
pub use server::FakeServer;
