//! Wire models of the Hetzner Cloud API.
//!
//! Models are forward compatible: unknown fields are ignored, fields the API may omit default,
//! and enums keep values they do not know as `Unknown(String)`.

mod certificate;
mod common;
mod load_balancer;
mod network;
mod server;

pub use certificate::*;
pub use common::*;
pub use load_balancer::*;
pub use network::*;
pub use server::*;

#[cfg(test)]
mod tests;
