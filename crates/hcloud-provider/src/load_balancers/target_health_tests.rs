//! The pure unhealthy-target watch: exact warnings per observation.

use std::net::IpAddr;

use hcloud_api::models::ServerId;

use super::*;

/// A Load Balancer whose targets report `health`: (server id or IP, [(port, status)]).
fn lb(health: &[(&str, &[(u16, &str)])]) -> LoadBalancer {
    let targets: Vec<serde_json::Value> = health
        .iter()
        .map(|(t, ports)| {
            let hs: Vec<serde_json::Value> =
                ports.iter().map(|(p, s)| serde_json::json!({"listen_port": p, "status": s})).collect();
            match t.parse::<i64>() {
                Ok(id) => serde_json::json!({"type": "server", "server": {"id": id}, "health_status": hs}),
                Err(_) => serde_json::json!({"type": "ip", "ip": {"ip": t}, "health_status": hs}),
            }
        })
        .collect();
    serde_json::from_value(serde_json::json!({"id": 7, "name": "web", "targets": targets})).expect("lb")
}

fn server(id: i64) -> TargetRef {
    TargetRef::Server(ServerId(id))
}

const AFTER: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn a_target_port_unhealthy_long_enough_is_reported_once_per_spell() {
    let mut w = HealthWatch::default();
    let t0 = Instant::now();
    let sick = lb(&[("1", &[(80, "unhealthy"), (443, "healthy")]), ("2", &[(80, "healthy")])]);
    assert_eq!(w.observe(&sick, t0, AFTER), vec![], "just seen: not yet");
    assert_eq!(w.observe(&sick, t0 + Duration::from_secs(59), AFTER), vec![]);
    let at = t0 + Duration::from_secs(61);
    assert_eq!(
        w.observe(&sick, at, AFTER),
        vec![Unhealthy { target: server(1), listen_port: 80, for_at_least: Duration::from_secs(61) }]
    );
    assert_eq!(w.observe(&sick, at + AFTER * 3, AFTER), vec![], "once per spell");

    // Healthy again ends the spell; the next one is reported again after its own time.
    let well = lb(&[("1", &[(80, "healthy"), (443, "healthy")])]);
    assert_eq!(w.observe(&well, at + AFTER * 4, AFTER), vec![]);
    assert!(w.is_empty(), "nothing unhealthy is kept");
    let again = at + AFTER * 5;
    assert_eq!(w.observe(&sick, again, AFTER), vec![]);
    assert_eq!(w.observe(&sick, again + AFTER, AFTER).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn unknown_health_ip_targets_and_several_ports_are_told_apart() {
    let mut w = HealthWatch::default();
    let t0 = Instant::now();
    let ip: IpAddr = "203.0.113.9".parse().expect("ip");
    let lb1 = lb(&[
        ("2", &[(443, "unhealthy"), (80, "unhealthy")]),
        ("203.0.113.9", &[(80, "unhealthy")]),
        ("3", &[(80, "unknown")]),
    ]);
    assert_eq!(w.observe(&lb1, t0, AFTER), vec![]);
    let due = w.observe(&lb1, t0 + AFTER, AFTER);
    let got: Vec<(TargetRef, u16)> = due.iter().map(|u| (u.target, u.listen_port)).collect();
    assert_eq!(
        got,
        vec![(server(2), 80), (server(2), 443), (TargetRef::Ip(ip), 80)],
        "sorted; unknown is not unhealthy"
    );
    w.forget(LoadBalancerId(7));
    assert!(w.is_empty());
}

#[test]
fn the_message_names_target_node_load_balancer_port_and_times() {
    let u = Unhealthy { target: server(1), listen_port: 80, for_at_least: Duration::from_secs(75) };
    let nodes = HashMap::from([(server(1), "node-a".to_owned())]);
    assert_eq!(
        message(&lb(&[]), &u, &nodes, AFTER),
        "Hetzner reports target server 1 (Node node-a) of Load Balancer web (7) unhealthy on port 80 for at least 75s \
         (warning after 60s): its health check fails, so it gets no traffic on that port"
    );
}

/// A sink that panics: a bug in publishing, inside the background pass.
struct PanickingSink;

impl EventSink for PanickingSink {
    fn publish(&self, _: ProviderEvent) {
        panic!("publishing failed");
    }
}

/// Issue 38, finding 6: a panic inside the background pass ends the pass; `pass_running` must
/// not stay true for ever (no pass would ever start again), and the next sync starts a new one.
#[tokio::test]
async fn a_pass_that_panics_is_not_running_any_more_and_the_next_sync_starts_one() {
    use hcloud_fake::control::{SeedLoadBalancer, SeedServer, TargetHealthOverride};

    let fake = hcloud_fake::FakeServer::start(hcloud_fake::FakeConfig { log_requests: false, ..Default::default() })
        .await
        .expect("fake");
    let h = fake.handle();
    let server = h.seed_server(&SeedServer::new("node-a")).expect("server");
    let seed: SeedLoadBalancer = serde_json::from_value(serde_json::json!({
        "name": "web",
        "targets": [{"type": "server", "server": {"id": server}}],
        "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}],
    }))
    .expect("seed");
    let id = h.seed_load_balancer(&seed).expect("lb");
    h.set_target_health(id, &TargetHealthOverride::server(server, "unhealthy")).expect("health");
    let client = hcloud_api::Client::builder(secrecy::SecretString::from("t"))
        .endpoint(fake.base_url())
        .build()
        .expect("client");
    let lb = client.load_balancers().get(LoadBalancerId(id as i64)).await.expect("lb");
    let period = Duration::from_millis(50);
    let inventory = Arc::new(LbInventory::new(client, period));
    let sink: Arc<dyn EventSink> = Arc::new(PanickingSink);
    let warnings = HealthWarnings::new(inventory, Arc::new(Mutex::new(sink)), period);
    let owner =
        EventObject { kind: "Service", api_version: "v1", namespace: Some("d".into()), name: "web".into(), uid: None };

    // Just seen unhealthy: nothing due at the sync; the pass finds it due and its warning panics.
    warnings.synced("uid-1", &owner, &lb, Some(Duration::from_millis(10)), HashMap::new());
    assert!(warnings.pass_running());
    let deadline = Instant::now() + Duration::from_secs(10);
    while warnings.pass_running() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!warnings.pass_running(), "the pass panicked, yet pass_running stays true");

    // The next sync starts a pass again, which lists again.
    h.reset_requests();
    warnings.synced("uid-1", &owner, &lb, Some(Duration::from_secs(3600)), HashMap::new());
    assert!(warnings.pass_running());
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.request_count("GET /v1/load_balancers") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(h.request_count("GET /v1/load_balancers") > 0, "a new pass runs");
}

#[test]
fn target_ports_are_counted_by_health_whatever_the_warning_setting() {
    let mixed = lb(&[
        ("1", &[(80, "unhealthy"), (443, "healthy")]),
        ("2", &[(80, "healthy"), (443, "unknown")]),
        ("203.0.113.9", &[(80, "unhealthy")]),
    ]);
    assert_eq!(port_health_counts(&mixed), [("healthy", 2), ("unhealthy", 2), ("unknown", 1)]);
    assert_eq!(port_health_counts(&lb(&[])), [("healthy", 0), ("unhealthy", 0), ("unknown", 0)]);
}
