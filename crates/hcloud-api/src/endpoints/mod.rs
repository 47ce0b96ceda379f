//! Endpoint groups, one per resource: `client.servers().get(id)`, `client.load_balancers()...`.

mod actions;
mod catalog;
mod certificates;
mod common;
mod load_balancers;
mod networks;
mod servers;

pub use actions::{ActionList, Actions};
pub use catalog::{LoadBalancerTypes, Locations, ServerTypes};
pub use certificates::Certificates;
pub use common::{Created, selector_from_labels};
pub use load_balancers::LoadBalancers;
pub use networks::Networks;
pub use servers::Servers;
