//! Read-only catalogues: locations, server types, load balancer types.

use reqwest::Method;
use serde::Deserialize;

use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{LoadBalancerType, Location, ServerType};

/// Location endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Locations<'a>(pub(crate) &'a Client);

/// Server type endpoints.
#[derive(Debug, Clone, Copy)]
pub struct ServerTypes<'a>(pub(crate) &'a Client);

/// Load balancer type endpoints.
#[derive(Debug, Clone, Copy)]
pub struct LoadBalancerTypes<'a>(pub(crate) &'a Client);

impl Locations<'_> {
    /// `GET /locations` — every page. Also a cheap way to check a token.
    pub async fn list_all(&self) -> Result<Vec<Location>, Error> {
        self.0.all(&Target::fixed("/locations"), "locations", &[]).await
    }
}

impl ServerTypes<'_> {
    /// `GET /server_types` — every page.
    pub async fn list_all(&self) -> Result<Vec<ServerType>, Error> {
        self.0.all(&Target::fixed("/server_types"), "server_types", &[]).await
    }
}

#[derive(Deserialize)]
struct OneLbType {
    load_balancer_type: LoadBalancerType,
}

impl LoadBalancerTypes<'_> {
    /// `GET /load_balancer_types` — every page.
    pub async fn list_all(&self) -> Result<Vec<LoadBalancerType>, Error> {
        self.0.all(&Target::fixed("/load_balancer_types"), "load_balancer_types", &[]).await
    }

    /// `GET /load_balancer_types/{id}`.
    pub async fn get(&self, id: i64) -> Result<LoadBalancerType, Error> {
        let one: OneLbType =
            self.0.json::<_, ()>(Method::GET, &Target::with_id("/load_balancer_types/{id}", id), &[], None).await?;
        Ok(one.load_balancer_type)
    }

    /// The type with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<LoadBalancerType>, Error> {
        let page = self
            .0
            .page::<LoadBalancerType>(
                &Target::fixed("/load_balancer_types"),
                "load_balancer_types",
                &[("name", name.to_owned())],
                1,
                1,
            )
            .await?;
        Ok(page.items.into_iter().find(|t| t.name == name))
    }
}
