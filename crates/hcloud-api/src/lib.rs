//! A typed, forward-compatible client for the Hetzner Cloud API, with no Kubernetes in it.
//!
//! ```text
//!  caller ──► endpoint group (client.servers().get(id), .load_balancers().add_target(..))
//!                │ builds path + query + typed body
//!                ▼
//!            Client::send ── one call: attempts within an overall deadline (default 1 min);
//!                │             retries per `retry` (429 and conflict for every method;
//!                │             502/503/504/bad_gateway/timeout, timeouts and broken
//!                │             connections only where repeating is harmless), waits from
//!                │             Retry-After / RateLimit-* or exponential backoff + jitter
//!                ▼
//!            request gate ── refused ──► Error::NotSent (nothing sent)
//!                ▼
//!            one HTTP exchange (bearer token, User-Agent, per-attempt timeout)
//!                │── RateLimit-* headers ──► Client::rate_limit()
//!                │── RequestObserver: started / observe (metrics, in-flight, accounting)
//!                │── HCLOUD_DEBUG wire log, secrets redacted
//!                ▼
//!            2xx: JSON decoded into forward-compatible models (unknown fields ignored,
//!                 absent fields defaulted, unknown enum values kept as `Unknown(String)`);
//!                 a list without its key is an error, never an empty list
//!            else: Error::Api(ApiError { status, code: ErrorCode, message, details,
//!                  correlation_id }) — or Transport / Timeout / Decode / DeadlineExceeded /
//!                  OutcomeUnknown (a create whose answer was lost)
//! ```
//!
//! Lists: `list` returns one [`Page`], `list_all` pages through everything with `per_page=50`,
//! `list_by_labels` finds resources by the labels they were created with. Mutations return an
//! [`Action`]; [`Client::wait_for_action`] polls it with backoff until it succeeds or fails,
//! within a timeout, and survives transient poll failures.
//!
//! Failure semantics the callers rely on:
//! - only a Hetzner `not_found` error envelope means "absent" ([`Error::is_not_found`]);
//! - a DELETE whose earlier attempt may have been applied waits out `locked` (its own
//!   deletion) and succeeds on `not_found`;
//! - a create (POST of a new resource) is never repeated once it may have been applied: the
//!   caller gets [`Error::OutcomeUnknown`] and looks the resource up by its labels.
//!
//! The token lives in a [`secrecy::SecretString`]; it never appears in `Debug` output, logs
//! or errors (a [`token_fingerprint`] may). [`Client::set_token`] replaces it while the
//! client runs (every clone sends the new one from its next HTTP exchange on), and
//! [`Client::with_token`] gives a client to try a new token with first.
//!
//! [`robot`] is the separate, much smaller client of the Robot webservice (dedicated servers):
//! basic auth, its own error envelope and codes, no retries.

mod client;
mod endpoints;
mod error;
mod error_code;
mod fingerprint;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod http_date;
pub mod models;
mod observe;
mod paging;
mod poll;
mod retry;
pub mod robot;
mod string_enum;
mod target;
mod waiter;
mod wire_log;

pub use client::{
    Client, ClientBuilder, DEFAULT_DEADLINE, DEFAULT_ENDPOINT, DEFAULT_TIMEOUT, LIST_ALL_PER_PAGE, RateLimit,
};
pub use endpoints::{
    ActionList, Actions, Certificates, Created, LoadBalancerTypes, LoadBalancers, Locations, Networks, ServerTypes,
    Servers, selector_from_labels,
};
pub use error::{ApiError, Error, ErrorCode, ErrorDetails, InvalidField};
pub use fingerprint::token_fingerprint;
pub use models::Action;
pub use observe::{RequestEvent, RequestGate, RequestObserver, RequestStart, WriteGate, WriteRequest, api_endpoint};
pub use paging::Page;
pub use poll::PollPolicy;
/// The HTTP method type of [`RequestEvent::method`].
pub use reqwest::Method;
pub use retry::RetryPolicy;
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
