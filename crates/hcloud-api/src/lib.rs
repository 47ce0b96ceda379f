//! A typed, forward-compatible client for the Hetzner Cloud API, with no Kubernetes in it.
//!
//! ```text
//!  caller ──► endpoint group (client.servers().get(id), .load_balancers().add_target(..))
//!                │ builds path + query + typed body
//!                ▼
//!            Client::send ── retry loop (RetryPolicy: conflict always; 429/5xx/timeouts
//!                │             only for idempotent methods; exponential backoff + jitter)
//!                ▼
//!            one HTTP exchange (bearer token, User-Agent, per-request timeout)
//!                │── RateLimit-* headers ──► Client::rate_limit()
//!                │── RequestObserver (metrics, request accounting)
//!                ▼
//!            2xx: JSON decoded into forward-compatible models (unknown fields ignored,
//!                 absent fields defaulted, unknown enum values kept as `Unknown(String)`)
//!            else: Error::Api(ApiError { status, code: ErrorCode, message, details,
//!                  correlation_id }) — or Transport / Timeout / Decode
//! ```
//!
//! Lists: `list` returns one [`Page`], `list_all` pages through everything with `per_page=50`.
//! Mutations return an [`Action`]; [`Client::wait_for_action`] polls it with backoff until it
//! succeeds or fails, within a deadline.
//!
//! The token lives in a [`secrecy::SecretString`]; it never appears in `Debug` output, logs
//! or errors.

mod client;
mod endpoints;
mod error;
pub mod models;
mod string_enum;

pub use client::{
    Client, ClientBuilder, DEFAULT_ENDPOINT, LIST_ALL_PER_PAGE, Page, PollPolicy, RateLimit, RequestEvent,
    RequestObserver, RetryPolicy,
};
pub use endpoints::{
    Actions, Certificates, Created, LoadBalancerTypes, LoadBalancers, Locations, Networks, ServerTypes, Servers,
};
pub use error::{ApiError, Error, ErrorCode, ErrorDetails, InvalidField};
pub use models::Action;
pub use secrecy::SecretString;

impl Client {
    /// Server endpoints.
    pub fn servers(&self) -> Servers<'_> {
        Servers(self)
    }

    /// Network endpoints.
    pub fn networks(&self) -> Networks<'_> {
        Networks(self)
    }

    /// Load balancer endpoints.
    pub fn load_balancers(&self) -> LoadBalancers<'_> {
        LoadBalancers(self)
    }

    /// Load balancer type endpoints.
    pub fn load_balancer_types(&self) -> LoadBalancerTypes<'_> {
        LoadBalancerTypes(self)
    }

    /// Server type endpoints.
    pub fn server_types(&self) -> ServerTypes<'_> {
        ServerTypes(self)
    }

    /// Location endpoints.
    pub fn locations(&self) -> Locations<'_> {
        Locations(self)
    }

    /// Certificate endpoints.
    pub fn certificates(&self) -> Certificates<'_> {
        Certificates(self)
    }

    /// Action endpoints.
    pub fn actions(&self) -> Actions<'_> {
        Actions(self)
    }
}
