//! The test-control surface (not part of Hetzner's API): seeding, instant mutations,
//! faults, locks, configuration, request counters and state snapshots.
//!
//! The same operations are available as methods on [`crate::FakeHandle`] and over HTTP
//! under `/_fake/` (see [`crate::http::control`] for the routes). Control requests are
//! neither authenticated, rate limited nor counted.

mod data_plane;
mod seed;
mod types;

pub use data_plane::*;
pub use seed::*;
pub use types::*;
