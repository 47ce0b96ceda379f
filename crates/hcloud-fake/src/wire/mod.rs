//! Wire types: the JSON shapes the fake serves and accepts, written from the OpenAPI
//! description of the Hetzner Cloud API (`components.schemas`).
//!
//! They are deliberately independent of the project's client crate, so a field-name
//! mistake on either side shows up as a test failure instead of being shared.
//! Response types are `Serialize + Deserialize` (tests parse responses into them);
//! request types are `Deserialize` with optional fields where the API has defaults.

pub mod catalog;
pub mod certificate;
pub mod common;
pub mod load_balancer;
pub mod network;
pub mod pricing;
pub mod primary_ip;
pub mod request;
pub mod server;

pub use catalog::*;
pub use certificate::*;
pub use common::*;
pub use load_balancer::*;
pub use network::*;
pub use pricing::*;
pub use primary_ip::*;
pub use server::*;
