//! The address refresh of a large project against the Hetzner fake: a stale server list is
//! confirmed by one look at the newest server and Primary IP actions (2 requests, and the
//! configured network: 3) instead of a list of every server, listed again when an action or
//! the network (deleted with its servers attached, which records no action; seen by the look
//! or by the route controller's read) shows a change, and never used for what changes without
//! an action (a server's status).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::Routes as _;

use hcloud_api::Client;
use hcloud_api::models::{AttachServerToNetworkRequest, NetworkId, ServerId};
use hcloud_fake::control::{PublicIpv6Change, SeedNetwork, SeedServerBatch};
use hcloud_fake::wire::ServerStatus;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::changes::resync_after;
use hcloud_provider::config::CacheMode;
use hcloud_provider::{HcloudMetrics, HcloudRoutes, Inventory, Lookup, RoutesConfig};

use crate::clock::age;

/// The address refresh's max age (`HCLOUD_SERVER_CACHE_MAX_AGE`).
const MAX_AGE: Duration = Duration::from_secs(10);
/// The address refresh's period (`--node-status-update-frequency`).
const PERIOD: Duration = Duration::from_secs(300);

struct Project {
    _fake: FakeServer,
    h: FakeHandle,
    client: Client,
    ids: Vec<u64>,
    network: u64,
}

/// `servers` servers, all in one network, whose actions take `action_delay`.
async fn project(servers: u32, action_delay: Duration) -> Project {
    let fake = FakeServer::start(FakeConfig::default().with_action_delay(action_delay)).await.expect("fake");
    let h = fake.handle();
    let network =
        h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("network");
    let mut batch = SeedServerBatch::new("n", servers);
    batch.networks = vec![network.into()];
    let ids = h.seed_servers(&batch).expect("seed");
    let client = crate::fake_client::no_retry_client(&fake.base_url());
    Project { _fake: fake, h, client, ids, network }
}

/// What the refresh sent: (server list pages, action list requests).
fn sent(h: &FakeHandle) -> (u64, u64) {
    let looks = h.request_count("GET /v1/servers/actions") + h.request_count("GET /v1/primary_ips/actions");
    (h.request_count("GET /v1/servers"), looks)
}

/// The API's id of a fake's server.
fn sid(id: u64) -> ServerId {
    ServerId(i64::try_from(id).unwrap())
}

fn lookups(ids: &[u64]) -> Vec<Lookup> {
    ids.iter().map(|id| Lookup::Id(sid(*id))).collect()
}

/// One address refresh: the announcement, then every Node's lookup.
async fn refresh(inv: &Inventory, ids: &[u64]) -> Vec<hcloud_api::models::Server> {
    let all = lookups(ids);
    inv.prefetch_addresses(&all, MAX_AGE).await;
    let mut out = Vec::new();
    for l in &all {
        out.push((*inv.get_addresses(l, MAX_AGE).await.unwrap().expect("server")).clone());
    }
    out
}

#[tokio::test]
async fn an_idle_large_project_costs_two_requests_per_refresh_not_a_list() {
    let p = project(500, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (10, 4), "the first refresh lists 10 pages after looking at the action lists");
    // 10 pages: the safety resync comes after 720 s, so the refreshes at 300 s and 600 s look.
    assert_eq!(resync_after(10), Duration::from_secs(720));
    for round in 1..=2u64 {
        age(PERIOD).await;
        refresh(&inv, &p.ids).await;
        assert_eq!(sent(&p.h), (10, 4 + 2 * round), "refresh {round}: one look (2 requests), no list");
    }
    assert_eq!(inv.stats().lists.get(), 1);
    // The safety resync: a real list once the list is `resync_after(10 pages)` old (900 s).
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 8 + 4), "the safety resync lists (after a new baseline)");
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 12 + 2), "and the next refresh looks again");
}

#[tokio::test]
async fn without_change_detection_every_refresh_lists_and_a_rename_shows_at_once() {
    // HCLOUD_SERVER_CACHE_CHANGE_DETECTION=false: the official CCM's cost, and its freshness
    // for what records no action (a rename through PUT).
    let p = project(500, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All).with_change_detection(false);
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (10, 0), "a list, no look");
    p.h.rename_server(p.ids[7], "renamed").expect("rename");
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 0), "every refresh lists");
    assert_eq!(servers.iter().find(|s| s.id == sid(p.ids[7])).map(|s| s.name.as_str()), Some("renamed"));
}

#[tokio::test]
async fn a_swapped_primary_ip_or_an_attached_network_shows_at_the_next_refresh() {
    let p = project(500, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    let target = p.ids[321];
    let before = p.h.server(target).unwrap().public_net.ipv6.unwrap().ip;
    p.h.change_server_ipv6(target, PublicIpv6Change::Next).unwrap();
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    let after = servers.iter().find(|s| s.id == sid(target)).unwrap().public_net.ipv6.clone().unwrap();
    assert_ne!(after.ip.to_string(), before, "the new IPv6 network shows");
    assert_eq!(after.ip.to_string(), p.h.server(target).unwrap().public_net.ipv6.unwrap().ip);
    assert_eq!(sent(&p.h), (20, 4 + 2 + 4), "a look saw the Primary IP actions, then a list");

    // A network attached through the API (an action) shows the same way.
    let other =
        p.h.seed_network(&SeedNetwork::new("other", "172.16.0.0/12").subnet("172.16.0.0/16", "eu-central")).unwrap();
    p.client
        .servers()
        .attach_to_network(
            sid(target),
            &AttachServerToNetworkRequest { network: NetworkId(i64::try_from(other).unwrap()), ip: None },
        )
        .await
        .unwrap();
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    let s = servers.iter().find(|s| s.id == sid(target)).unwrap();
    assert!(s.private_ip_in(NetworkId(i64::try_from(other).unwrap())).is_some(), "the new network's IP shows");
    assert!(s.private_ip_in(NetworkId(i64::try_from(p.network).unwrap())).is_some());
    assert_eq!(sent(&p.h).0, 30);
}

#[tokio::test]
async fn a_status_change_without_an_action_is_never_answered_from_a_confirmed_list() {
    let p = project(500, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    let target = p.ids[7];
    // A shutdown from inside the server: no action.
    p.h.set_server_status(target, ServerStatus::Off).unwrap();
    age(PERIOD).await;
    let all = lookups(&p.ids);
    inv.prefetch_addresses(&all, MAX_AGE).await;
    assert_eq!(sent(&p.h), (10, 6), "confirmed: nothing happened that an action shows");
    // The lifecycle's lookup needs the status: it is not answered by the confirmed list (nor
    // by the address refresh's pin), but asked for.
    let gets = p.h.request_count("GET /v1/servers/{id}");
    let current = inv.get(&Lookup::Id(sid(target)), Duration::from_secs(60)).await.unwrap().unwrap();
    assert_eq!(current.status, hcloud_api::models::ServerStatus::Off);
    assert_eq!(p.h.request_count("GET /v1/servers/{id}"), gets + 1);
    // Existence is confirmed by a direct lookup, as always.
    assert!(inv.exists(&Lookup::Id(sid(target)), Duration::from_secs(60)).await.unwrap());
}

#[tokio::test]
async fn an_action_running_at_the_baseline_makes_the_next_refresh_list_again() {
    let p = project(500, Duration::from_secs(3600)).await;
    let target = p.ids[3];
    p.client.servers().poweroff(sid(target)).await.unwrap();
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (10, 4));
    // The action finishes after the list: its effect may be missing from it.
    p.h.finish_all_actions();
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 8), "no look: the baseline had a running action, so list again");
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 10), "now quiet: confirmed");
}

#[tokio::test]
async fn a_rename_without_an_action_shows_at_the_safety_resync() {
    let p = project(500, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    let target = p.ids[42];
    p.h.rename_server(target, "renamed").unwrap();
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    assert_eq!(servers.iter().find(|s| s.id == sid(target)).unwrap().name, "n43", "not seen yet: no action");
    age(resync_after(10)).await;
    let servers = refresh(&inv, &p.ids).await;
    assert_eq!(servers.iter().find(|s| s.id == sid(target)).unwrap().name, "renamed", "seen at the resync");
}

#[tokio::test]
async fn a_small_project_lists_on_every_refresh_without_looking() {
    let p = project(100, Duration::ZERO).await;
    let inv = Inventory::new(p.client.clone(), CacheMode::All);
    refresh(&inv, &p.ids).await;
    for round in 1..=3u64 {
        age(PERIOD).await;
        refresh(&inv, &p.ids).await;
        assert_eq!(sent(&p.h), (2 + 2 * round, 0), "as before: one 2-page list per refresh");
    }
}

/// The fake's network id as the API's.
fn nid(id: u64) -> NetworkId {
    NetworkId(i64::try_from(id).unwrap())
}

#[tokio::test]
async fn a_network_deleted_with_its_servers_shows_at_the_next_refresh() {
    let p = project(500, Duration::ZERO).await;
    let network = nid(p.network);
    let inv = Inventory::new(p.client.clone(), CacheMode::All).with_network(Some(network));
    let servers = refresh(&inv, &p.ids).await;
    assert!(servers.iter().all(|s| s.private_ip_in(network).is_some()));
    let reads = |h: &FakeHandle| h.request_count("GET /v1/networks/{id}");
    assert_eq!((sent(&p.h), reads(&p.h)), ((10, 4), 1), "the baseline reads the network too");
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!((sent(&p.h), reads(&p.h)), ((10, 6), 2), "a quiet look: 3 requests, no list");

    // Deleted with every server attached: the API detaches them without a server action.
    let actions = p.h.request_count("GET /v1/servers/actions");
    p.client.networks().delete(network).await.unwrap();
    assert_eq!(p.h.request_count("GET /v1/servers/actions"), actions);
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    assert!(servers.iter().all(|s| s.private_ip_in(network).is_none()), "every InternalIP gone at the next refresh");
    assert_eq!(sent(&p.h).0, 20, "the look saw the network gone (404) and listed every server");
    assert_eq!(reads(&p.h), 4, "the look's read, then the new baseline's (404 both)");
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h).0, 20, "still gone: confirmed, not listed again");
}

#[tokio::test]
async fn a_network_read_by_the_route_controller_that_shows_a_change_makes_the_next_refresh_list() {
    let p = project(500, Duration::ZERO).await;
    let network = nid(p.network);
    let inv = Inventory::new(p.client.clone(), CacheMode::All).with_network(Some(network));
    refresh(&inv, &p.ids).await;
    let attached: Vec<ServerId> = p.ids.iter().map(|id| sid(*id)).collect();
    // The same servers attached, or another network: nothing changes.
    inv.network_seen(network, Some(&attached));
    inv.network_seen(nid(p.network + 1), None);
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (10, 6), "confirmed by a look");
    // The route controller's read finds the network gone: no look, a list.
    inv.network_seen(network, None);
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (20, 6 + 4), "listed after a new baseline, without a look first");
}

#[tokio::test]
async fn the_route_controllers_read_of_a_deleted_network_reaches_the_inventory() {
    let p = project(500, Duration::ZERO).await;
    let network = nid(p.network);
    let inv = Arc::new(Inventory::new(p.client.clone(), CacheMode::All).with_network(Some(network)));
    let config = RoutesConfig {
        network,
        network_name: "k8s".to_owned(),
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        confirm_max_age: MAX_AGE,
    };
    let routes = HcloudRoutes::new(p.client.clone(), inv.clone(), config, HcloudMetrics::default());
    refresh(&inv, &p.ids).await;
    routes.list_routes("kubernetes").await.expect("the network's routes");
    age(PERIOD).await;
    refresh(&inv, &p.ids).await;
    assert_eq!(sent(&p.h), (10, 6), "the route read showed the same servers: confirmed by a look");

    p.client.networks().delete(network).await.unwrap();
    assert!(routes.list_routes("kubernetes").await.is_err(), "the route controller finds it gone");
    age(PERIOD).await;
    let servers = refresh(&inv, &p.ids).await;
    assert!(servers.iter().all(|s| s.private_ip_in(network).is_none()));
    assert_eq!(sent(&p.h), (20, 6 + 4), "listed (after a new baseline) without a look first");
}
