//! The shared server inventory and HcloudInstances against the Hetzner fake: how many API
//! requests each lookup pattern costs, and that answers stay correct.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{InstancesV2, LookupPurpose};
use hcloud_api::Client;
use hcloud_api::models::ServerId;
use hcloud_fake::control::{SeedNetwork, SeedServer, SeedServerBatch};
use hcloud_fake::faults::{FaultRule, HtmlError};
use hcloud_fake::wire::ServerStatus;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::config::{AddressFamily, CacheMode};
use hcloud_provider::{HcloudInstances, Inventory, Lookup};
use k8s_openapi::api::core::v1::{Node, NodeSpec};

use crate::clock::age;

const LONG: Duration = Duration::from_secs(3600);
/// A max age the tests outlive on purpose with [`age`].
const SHORT: Duration = Duration::from_secs(10);

async fn fake() -> (FakeServer, FakeHandle, Client) {
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let client = crate::fake_client::no_retry_client(&fake.base_url());
    let h = fake.handle();
    (fake, h, client)
}

fn lists(h: &FakeHandle) -> u64 {
    h.request_count("GET /v1/servers")
}

fn gets(h: &FakeHandle) -> u64 {
    h.request_count("GET /v1/servers/{id}")
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n.spec = Some(NodeSpec { provider_id: provider_id.map(str::to_owned), ..Default::default() });
    n
}

#[tokio::test]
async fn concurrent_lookups_of_unknown_servers_share_one_list() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Arc::new(Inventory::new(client, CacheMode::All));
    let lookups = (1..=120).map(|i| {
        let inv = inv.clone();
        async move { inv.get(&Lookup::Name(format!("n{i}")), LONG).await }
    });
    let found = futures::future::join_all(lookups).await;
    assert!(found.iter().all(|r| matches!(r, Ok(Some(_)))), "every server found");
    assert_eq!(lists(&h), 3, "one paginated list (3 pages of 50) served 120 concurrent lookups");
    assert_eq!(inv.stats().lists.get(), 1);
}

#[tokio::test]
async fn a_missing_server_does_not_cause_a_relist_storm() {
    let (_f, h, client) = fake().await;
    h.seed_server(&SeedServer::new("present")).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    for _ in 0..50 {
        assert!(inv.get(&Lookup::Name("ghost".into()), LONG).await.expect("lookup").is_none());
    }
    assert_eq!(lists(&h), 1, "the fresh snapshot answers 'absent' without new lists");
    // Once the snapshot is older than the caller's max age, one new list (not one per lookup).
    age(SHORT + Duration::from_secs(1)).await;
    for _ in 0..20 {
        assert!(inv.get(&Lookup::Name("ghost".into()), SHORT).await.expect("lookup").is_none());
    }
    assert_eq!(lists(&h), 2);
}

#[tokio::test]
async fn a_stale_known_server_is_refreshed_alone() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 60)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let first = inv.get(&Lookup::Name("n7".into()), LONG).await.expect("lookup").expect("found");
    assert_eq!(lists(&h), 2, "cold cache: one list of two pages");
    age(SHORT + Duration::from_secs(1)).await;
    h.set_server_status(first.id.0 as u64, ServerStatus::Off).expect("status");
    let again = inv.get(&Lookup::Id(first.id), SHORT).await.expect("lookup").expect("found");
    assert_eq!(again.status, hcloud_api::models::ServerStatus::Off, "the fresh answer");
    assert_eq!((lists(&h), gets(&h)), (2, 1), "one GET /servers/{{id}}, no list");
}

#[tokio::test]
async fn prefetch_lists_once_and_pins_answers_within_the_max_age() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let all: Vec<Lookup> = (1..=120).map(|i| Lookup::Name(format!("n{i}"))).collect();
    inv.prefetch(&all, SHORT).await;
    assert_eq!(lists(&h), 3);
    age(SHORT / 2).await;
    // A second announcement of the same burst finds everything pinned: no new list.
    inv.prefetch(&all, SHORT).await;
    for l in &all[..100] {
        assert!(inv.get(l, SHORT).await.expect("lookup").is_some(), "{l:?} answered from its pin");
    }
    assert_eq!((lists(&h), gets(&h)), (3, 0), "100 lookups after one list cost nothing more");
    // Pins are used once: the next lookup of a pinned server is answered from the (still
    // fresh) snapshot, also without a request.
    assert!(inv.get(&all[0], SHORT).await.expect("lookup").is_some());
    assert_eq!(h.request_log().len(), 3);

    // A pin older than the lookup's max age is not served: the caller asked for fresher data.
    // The 20 pins left aged alike (the burst outlasted the max age): the burst is announced
    // again, one list for all of them rather than one request each.
    age(SHORT).await;
    assert!(inv.get(&all[100], SHORT).await.expect("lookup").is_some());
    assert_eq!((lists(&h), gets(&h)), (6, 0), "one more 3-page list for the 20 stale pins");
    for l in &all[101..] {
        assert!(inv.get(l, SHORT).await.expect("lookup").is_some(), "{l:?} answered from its new pin");
    }
    assert_eq!(h.request_log().len(), 6, "the rest of the burst costs nothing more");
    // A burst announced again after its data aged is listed again (once).
    age(SHORT + Duration::from_secs(1)).await;
    inv.prefetch(&all[101..], SHORT).await;
    assert_eq!(lists(&h), 9, "one more 3-page list for the 19 stale servers");
}

#[tokio::test]
async fn few_stale_pins_are_refreshed_alone() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let two: Vec<Lookup> = (1..=2).map(|i| Lookup::Name(format!("n{i}"))).collect();
    inv.prefetch(&two, SHORT).await;
    assert_eq!(lists(&h), 3, "cold cache: one list");
    age(SHORT + Duration::from_secs(1)).await;
    assert!(inv.get(&two[0], SHORT).await.expect("lookup").is_some());
    let log = h.request_log();
    assert_eq!(log.len(), 4, "two stale pins are cheaper one by one than a 3-page list");
    let last = log.last().expect("request");
    assert!(last.query.as_deref().is_some_and(|q| q.contains("name=n1")), "a single by-name lookup: {last:?}");
}

#[tokio::test]
async fn recheck_fetches_current_answers_and_pins_confirmed_absence() {
    let (_f, h, client) = fake().await;
    let ids = h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let lookups: Vec<Lookup> = ids.iter().map(|id| Lookup::Id(ServerId(*id as i64))).collect();
    inv.prefetch(&lookups, LONG).await;
    assert_eq!(lists(&h), 3);
    // One server is powered off, another deleted: the cached snapshot does not know yet.
    h.set_server_status(ids[0], ServerStatus::Off).expect("status");
    h.delete_server(ids[1]).expect("delete");
    inv.recheck(&lookups[..2]).await;
    assert_eq!((lists(&h), gets(&h)), (3, 2), "two rechecks: one GET each, no list");
    let off = inv.get(&lookups[0], LONG).await.expect("lookup").expect("exists");
    assert_eq!(off.status, hcloud_api::models::ServerStatus::Off, "the current status");
    assert!(!inv.exists(&lookups[1], LONG).await.expect("answer"), "gone");
    assert_eq!(gets(&h), 2, "the recheck's direct answer needs no second confirmation");
    // Many rechecks at once: one list is cheaper than one GET each.
    inv.recheck(&lookups[2..10]).await;
    assert_eq!((lists(&h), gets(&h)), (6, 2));
}

#[tokio::test]
async fn prefetch_of_few_stale_servers_does_not_list() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    inv.prefetch(&[Lookup::Name("n1".into())], LONG).await;
    assert_eq!(lists(&h), 3, "cold cache: listing is the only way to learn");
    age(SHORT + Duration::from_secs(1)).await;
    inv.prefetch(&[Lookup::Name("n2".into()), Lookup::Name("n3".into())], SHORT).await;
    assert_eq!(lists(&h), 3, "two stale servers are cheaper one by one than a 3-page list");
}

#[tokio::test]
async fn mode_one_and_off() {
    let (_f, h, client) = fake().await;
    let id = ServerId(h.seed_server(&SeedServer::new("s")).expect("seed") as i64);
    let one = Inventory::new(client.clone(), CacheMode::One);
    for _ in 0..5 {
        assert!(one.get(&Lookup::Id(id), LONG).await.expect("lookup").is_some());
    }
    assert_eq!((lists(&h), gets(&h)), (0, 1), "mode one: one GET, then cached");
    let off = Inventory::new(client, CacheMode::Off);
    for _ in 0..5 {
        assert!(off.get(&Lookup::Id(id), LONG).await.expect("lookup").is_some());
    }
    assert_eq!((lists(&h), gets(&h)), (0, 6), "mode off: every lookup is a request");
}

#[tokio::test]
async fn transient_failures_start_a_cooldown() {
    let (_f, h, client) = fake().await;
    h.seed_server(&SeedServer::new("s")).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    h.inject_fault(FaultRule::error(Some("GET"), "/servers", 503, "unavailable").times(1));
    let err = inv.get(&Lookup::Name("s".into()), LONG).await.expect_err("outage");
    assert!(err.is_transient());
    let err = inv.get(&Lookup::Name("s".into()), LONG).await.expect_err("cooling down");
    assert!(err.to_string().contains("not sent"), "{err}");
    assert_eq!(lists(&h), 1, "no request during the cooldown");
    // The first cooldown is one second; then the API is asked again.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match inv.get(&Lookup::Name("s".into()), LONG).await {
            Ok(found) => {
                assert!(found.is_some());
                break;
            }
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "still failing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    assert_eq!(lists(&h), 2);
}

fn instances(inv: Arc<Inventory>, network: Option<hcloud_api::models::NetworkId>) -> HcloudInstances {
    HcloudInstances::new(inv, network, AddressFamily::Ipv4, true, Duration::from_secs(10), Duration::from_secs(60))
}

#[tokio::test]
async fn instance_exists_confirms_absence_with_a_direct_lookup() {
    let (_f, h, client) = fake().await;
    let id = h.seed_server(&SeedServer::new("w1")).expect("seed");
    let inv = Arc::new(Inventory::new(client, CacheMode::All));
    let i = instances(inv, None);
    let n = node("w1", Some(&format!("hcloud://{id}")));
    assert!(i.instance_exists(&n).await.expect("exists"));
    h.delete_server(id).expect("delete");
    // The cached snapshot still has the server: exists stays true until the data ages.
    assert!(i.instance_exists(&n).await.expect("cached"));
    // A node whose server is unknown to the snapshot is confirmed gone by GET /servers/{id}.
    let ghost = node("w2", Some("hcloud://99999999"));
    let before = gets(&h);
    assert!(!i.instance_exists(&ghost).await.expect("confirmed gone"));
    assert_eq!(gets(&h), before + 1, "absence confirmed by a direct lookup");
    // An API error is never "gone".
    h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 500, "server_error").times(1));
    assert!(i.instance_exists(&node("w3", Some("hcloud://88888888"))).await.is_err());
}

#[tokio::test]
async fn metadata_shutdown_and_clear_errors() {
    let (_f, h, client) = fake().await;
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let id = h
        .seed_server(&SeedServer::new("m1").server_type("cax11").location("hel1").network_ip(net, "10.0.0.5"))
        .expect("seed");
    let inv = Arc::new(Inventory::new(client, CacheMode::All));
    let i = instances(inv, Some(hcloud_api::models::NetworkId(net as i64)));
    let md = i.instance_metadata(&node("m1", None)).await.expect("metadata").expect("some");
    assert_eq!(md.provider_id, format!("hcloud://{id}"));
    assert_eq!((md.instance_type.as_str(), md.region.as_str(), md.zone.as_str()), ("cax11", "hel1", "hel1-dc2"));
    assert!(
        md.node_addresses.iter().any(|a| a.address == "10.0.0.5" && a.kind == cloud_provider::AddressType::InternalIp)
    );
    assert!(!i.instance_shutdown(&node("m1", None)).await.expect("running"));

    let err = i.instance_metadata(&node("nope", None)).await.expect_err("no server");
    assert_eq!(err.reason(), "ServerNotFound");
    assert!(err.to_string().contains("no server named \"nope\""), "{err}");
    let err = i.instance_metadata(&node("r", Some("hrobot://1"))).await.expect_err("robot");
    assert_eq!(err.reason(), "RobotClientMissing", "Robot off: an error, never an absence");
    assert!(err.to_string().contains("ROBOT_ENABLED"), "{err}");

    // Prefetch for the lifecycle uses the lifecycle max age.
    i.prefetch(&[Arc::new(node("m1", None))], LookupPurpose::Lifecycle).await;
    assert_eq!(lists(&h), 1, "fresh snapshot: nothing to prefetch");
}

#[tokio::test]
async fn absence_is_confirmed_once_and_only_when_it_came_from_cached_data() {
    let (_f, h, client) = fake().await;
    h.seed_server(&SeedServer::new("present")).expect("seed");
    let ghost = Lookup::Id(ServerId(77777777));
    for mode in [CacheMode::Off, CacheMode::One] {
        let inv = Inventory::new(client.clone(), mode);
        let before = gets(&h);
        assert!(!inv.exists(&ghost, LONG).await.expect("answer"));
        assert_eq!(gets(&h), before + 1, "{mode:?}: the direct lookup is the confirmation");
    }
    let all = Inventory::new(client, CacheMode::All);
    assert!(all.exists(&Lookup::Name("present".into()), LONG).await.expect("answer"));
    let (lists_before, gets_before) = (lists(&h), gets(&h));
    assert!(!all.exists(&ghost, LONG).await.expect("answer"));
    assert_eq!(
        (lists(&h), gets(&h)),
        (lists_before, gets_before + 1),
        "all: absent from the snapshot, confirmed by one GET"
    );
}

/// A proxy's (or a wrong `HCLOUD_ENDPOINT`'s) "404 Not Found" page for every matching request.
/// The fake's `html` answer is documented for 5xx; built by hand it renders any status.
fn page_404(method: &str, path: &str) -> FaultRule {
    let mut rule = FaultRule::html(Some(method), path, 502).times(0);
    rule.html = Some(HtmlError { status: 404 });
    rule
}

#[tokio::test]
async fn a_404_page_that_is_not_the_apis_error_never_means_the_server_is_gone() {
    let (_f, h, client) = fake().await;
    let id = h.seed_server(&SeedServer::new("w1")).expect("seed");
    h.inject_fault(page_404("GET", "/servers/{id}"));
    h.inject_fault(page_404("GET", "/servers"));
    let nodes = [node("w1", Some(&format!("hcloud://{id}"))), node("w2", Some("hcloud://99999999")), node("w1", None)];
    for mode in [CacheMode::Off, CacheMode::One, CacheMode::All] {
        let i = instances(Arc::new(Inventory::new(client.clone(), mode)), None);
        for n in &nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            let err = i.instance_exists(n).await.expect_err("a 404 page is no answer about the server");
            assert_eq!(err.reason(), "HcloudAPIError", "{mode:?} {name}: {err}");
            assert!(err.to_string().contains("404 Not Found"), "{err}");
            let err = i.instance_metadata(n).await.expect_err("no metadata either");
            assert_ne!(err.reason(), "ServerNotFound", "{mode:?} {name}: {err}");
        }
    }
    // The API's own not_found still confirms an absence.
    h.clear_faults();
    let i = instances(Arc::new(Inventory::new(client, CacheMode::Off)), None);
    assert!(!i.instance_exists(&nodes[1]).await.expect("confirmed gone"));
    assert!(i.instance_exists(&nodes[0]).await.expect("exists"));
}

#[tokio::test]
async fn a_burst_whose_pin_another_lookup_took_is_still_listed_once() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let all: Vec<Lookup> = (1..=120).map(|i| Lookup::Name(format!("n{i}"))).collect();
    inv.prefetch(&all, SHORT).await;
    assert_eq!(lists(&h), 3);
    // Another controller, with a longer max age, takes n1's pin.
    assert!(inv.get(&all[0], LONG).await.expect("lookup").is_some());
    age(SHORT + Duration::from_secs(1)).await;
    // n1 has no pin and stale data, while the 119 pins left aged out: one list for them all.
    assert!(inv.get(&all[0], SHORT).await.expect("lookup").is_some());
    assert_eq!(lists(&h), 6, "one more 3-page list, no single request");
    for l in &all[1..] {
        assert!(inv.get(l, SHORT).await.expect("lookup").is_some());
    }
    assert_eq!(h.request_log().len(), 6, "the rest of the burst answered from the new pins");
}

#[tokio::test]
async fn pins_of_lookups_that_never_come_are_renewed_only_within_the_pin_ttl() {
    let (_f, h, client) = fake().await;
    h.seed_servers(&SeedServerBatch::new("n", 120)).expect("seed");
    let inv = Inventory::new(client, CacheMode::All);
    let all: Vec<Lookup> = (1..=120).map(|i| Lookup::Name(format!("n{i}"))).collect();
    inv.prefetch(&all, SHORT).await;
    // Only n1 is ever looked up again, every 14 s: the 119 other pins renew with it (a list
    // each time) until 180 s after their announcement, then n1 is refreshed alone. The clock runs
    // between the steps (the requests need real time), so the last step within the TTL (168 s)
    // leaves 12 s for the test's own run time, which a loaded machine takes a few of.
    let step = SHORT + Duration::from_secs(4);
    let within_ttl = hcloud_provider::inventory::PIN_TTL.as_secs() / step.as_secs();
    assert!(
        hcloud_provider::inventory::PIN_TTL.as_secs() - within_ttl * step.as_secs() >= 10,
        "the last step within the TTL leaves room for the test's run time"
    );
    for _ in 0..within_ttl + 3 {
        age(step).await;
        assert!(inv.get(&all[0], SHORT).await.expect("lookup").is_some());
    }
    assert_eq!(lists(&h), 3 + within_ttl * 3 + 3, "a 3-page list per step within the TTL, then one single each");
    let last = h.request_log().last().cloned().expect("request");
    assert!(last.query.as_deref().is_some_and(|q| q.contains("name=n1")), "a single by-name lookup: {last:?}");
}
