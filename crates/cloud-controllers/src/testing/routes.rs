//! Routes: a port of upstream's fake `RouteMap` (`ListRoutes`, `CreateRoute`, `DeleteRoute`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use cloud_provider::CloudError;

/// Upstream's `fakecloud.Route`: a route and the cluster it belongs to.
#[derive(Debug, Clone)]
pub(crate) struct FakeRoute {
    pub cluster_name: String,
    pub route: cloud_provider::Route,
}

/// The routes capability of upstream's fake, plus scripted failures.
///
/// Differences from upstream: a failed call does not make every later call fail (upstream
/// keeps the error in `f.Err`, so after one failed create its `ListRoutes` fails forever);
/// `fail_creates` fails the next creations with a transient error (a busy network);
/// provider IDs `fake://<n>` have a canonical form (no leading zeros);
/// `refuse_destinations` are refused until the node's route changes.
#[derive(Default)]
pub(crate) struct FakeRoutes {
    /// `RouteMap`, by route name.
    pub route_map: Mutex<BTreeMap<String, FakeRoute>>,
    /// Every call, by upstream's names.
    pub calls: Mutex<Vec<String>>,
    /// How many of the next `CreateRoute` calls fail transiently.
    pub fail_creates: Mutex<u32>,
    /// `ListRoutes` fails with this message while set.
    pub list_error: Mutex<Option<&'static str>>,
    /// Destinations `CreateRoute` refuses until the route asked for changes (a value the
    /// cloud cannot route).
    pub refuse_destinations: Mutex<Vec<String>>,
}

impl FakeRoutes {
    /// A fake holding `routes` of `cluster` (keyed by their names, as upstream's tests do).
    pub(crate) fn with_routes(cluster: &str, routes: &[cloud_provider::Route]) -> Self {
        let fake = FakeRoutes::default();
        {
            let mut map = fake.route_map.lock().expect("lock");
            for r in routes {
                map.insert(r.name.clone(), FakeRoute { cluster_name: cluster.to_owned(), route: r.clone() });
            }
        }
        fake
    }

    fn add_call(&self, desc: &str) {
        self.calls.lock().expect("calls lock").push(desc.to_owned());
    }

    /// The calls recorded so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls lock").clone()
    }

    /// The routes of `cluster` now.
    pub(crate) fn routes(&self, cluster: &str) -> Vec<cloud_provider::Route> {
        self.route_map
            .lock()
            .expect("lock")
            .values()
            .filter(|r| r.cluster_name == cluster)
            .map(|r| r.route.clone())
            .collect()
    }
}

impl cloud_provider::Routes for FakeRoutes {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<cloud_provider::Route>, CloudError> {
        self.add_call("list-routes");
        if let Some(msg) = *self.list_error.lock().expect("lock") {
            return Err(CloudError::transient("FakeError", msg, None));
        }
        Ok(self.routes(cluster_name))
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &cloud_provider::Route,
    ) -> Result<(), CloudError> {
        self.add_call("create-route");
        if self.refuse_destinations.lock().expect("lock").contains(&route.destination_cidr) {
            return Err(CloudError::refused(
                "FakeDestinationRefused",
                format!("destination {} cannot be routed by this cloud", route.destination_cidr),
            ));
        }
        {
            let mut fail = self.fail_creates.lock().expect("lock");
            if *fail > 0 {
                *fail -= 1;
                return Err(CloudError::transient("FakeBusy", "the network is busy", None));
            }
        }
        let name = format!("{cluster_name}-{}-{}", route.target_node, route.destination_cidr);
        let mut map = self.route_map.lock().expect("lock");
        if map.contains_key(&name) {
            return Err(CloudError::failed("FakeError", format!("route {name:?} already exists")));
        }
        let mut stored = route.clone();
        stored.name = name.clone();
        map.insert(name, FakeRoute { cluster_name: cluster_name.to_owned(), route: stored });
        Ok(())
    }

    /// `fake://<n>`: the number without leading zeros (`fake://007` is `fake://7`).
    fn canonical_provider_id<'a>(&self, provider_id: &'a str) -> std::borrow::Cow<'a, str> {
        match provider_id.strip_prefix("fake://") {
            Some(n) if n.len() > 1 && n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()) => {
                let trimmed = n.trim_start_matches('0');
                format!("fake://{}", if trimmed.is_empty() { "0" } else { trimmed }).into()
            }
            _ => provider_id.into(),
        }
    }

    async fn delete_route(&self, cluster_name: &str, route: &cloud_provider::Route) -> Result<(), CloudError> {
        self.add_call("delete-route");
        let mut map = self.route_map.lock().expect("lock");
        let key = map
            .iter()
            .find(|(_, saved)| {
                route.destination_cidr == saved.route.destination_cidr
                    && route.target_node == saved.route.target_node
                    && cluster_name == saved.cluster_name
            })
            .map(|(k, _)| k.clone());
        match key {
            Some(k) => {
                map.remove(&k);
                Ok(())
            }
            None => Err(CloudError::failed(
                "FakeError",
                format!(
                    "no route found for node:{} with DestinationCIDR== {}",
                    route.target_node, route.destination_cidr
                ),
            )),
        }
    }
}
