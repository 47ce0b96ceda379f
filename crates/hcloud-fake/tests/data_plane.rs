//! The opt-in Load Balancer data plane over real TCP on 127.x addresses: Load Balancers
//! created through the public API forward to small backends, spread by their algorithm, check
//! health for real, send the PROXY protocol header, follow service and Load Balancer changes,
//! report bind errors and stop with the fake. Each test uses its own /24s (backends on
//! `127.0.<block>.x`, Load Balancers on `127.10.<block>.x`), so they run in parallel.
//! Conditions are polled with a deadline, never slept for. Linux: every 127.x address answers
//! without setup.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "data_plane/harness.rs"]
pub(crate) mod harness;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hcloud_fake::control::{ListenerState, SeedNetwork, SeedServer, TargetHealthOverride};
use hcloud_fake::{DataPlaneConfig, FakeConfig, FakeServer, ProxyProtocolVersion};
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use harness::{Fx, backends, eventually, get, refused, tcp_check, tcp_service};

fn lb_body(name: &str, algorithm: &str, services: serde_json::Value, targets: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "load_balancer_type": "lb11", "location": "fsn1",
           "algorithm": {"type": algorithm}, "services": services, "targets": targets})
}

fn server_target(id: u64) -> serde_json::Value {
    json!({"type": "server", "server": {"id": id}})
}

#[tokio::test]
async fn requests_reach_the_backends_round_robin() {
    let fx = Fx::new(1).await;
    let (b, port) = backends(&fx, &["alpha", "beta"], 11).await;
    let a = fx.server("alpha", 11);
    let c = fx.server("beta", 12);
    let http_check = json!({"protocol": "http", "port": port, "interval": 1, "timeout": 1, "retries": 2,
                            "http": {"path": "/healthz", "status_codes": ["2??"]}});
    let (lb, ip) = fx
        .create_lb(lb_body(
            "web",
            "round_robin",
            json!([tcp_service(8080, port, http_check)]),
            json!([server_target(a), server_target(c)]),
        ))
        .await;
    // The address in the API is the one that answers.
    assert_eq!(ip.octets()[..3], [127, 10, 1]);
    let listeners = eventually("a listener", || async {
        let l = fx.h.data_plane_listeners();
        (l.len() == 1 && l[0].state == ListenerState::Listening).then_some(l)
    })
    .await;
    assert_eq!(listeners[0].address, SocketAddr::new(IpAddr::V4(ip), 8080));
    assert_eq!(listeners[0].load_balancer, lb);
    fx.wait_health(lb, a, 8080, "healthy").await;
    fx.wait_health(lb, c, 8080, "healthy").await;

    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    let mut names = Vec::new();
    for _ in 0..6 {
        names.push(get(addr).await.expect("an answer through the Load Balancer"));
    }
    for pair in names.windows(2) {
        assert_ne!(pair[0], pair[1], "round robin alternates: {names:?}");
    }
    assert_eq!((b[0].served(), b[1].served()), (3, 3), "{names:?}");
    let l = &fx.h.data_plane_listeners()[0];
    assert_eq!(l.accepted_connections, 6);
    assert_eq!(l.rejected_connections, 0);
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn label_selector_and_ip_targets_all_get_traffic() {
    let fx = Fx::new(2).await;
    let (b, port) = backends(&fx, &["one", "two", "three"], 11).await;
    let web = |name: &str, n: u8| SeedServer {
        public_ipv4: Some(fx.backend_ip(n).to_string()),
        ..SeedServer::new(name).label("role", "web")
    };
    let s1 = fx.h.seed_server(&web("one", 11)).unwrap();
    let s2 = fx.h.seed_server(&web("two", 12)).unwrap();
    let (lb, ip) = fx
        .create_lb(lb_body(
            "mixed",
            "round_robin",
            json!([tcp_service(9000, port, tcp_check(port, 2))]),
            json!([{"type": "label_selector", "label_selector": {"selector": "role=web"}},
                   {"type": "ip", "ip": {"ip": fx.backend_ip(13).to_string()}}]),
        ))
        .await;
    fx.wait_health(lb, s1, 9000, "healthy").await;
    fx.wait_health(lb, s2, 9000, "healthy").await;
    fx.wait_health(lb, fx.backend_ip(13), 9000, "healthy").await;
    let addr = SocketAddr::new(IpAddr::V4(ip), 9000);
    for _ in 0..6 {
        get(addr).await.expect("an answer");
    }
    assert_eq!(b.iter().map(|b| b.served()).collect::<Vec<_>>(), vec![2, 2, 2]);
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn a_stopped_backend_turns_unhealthy_gets_no_traffic_and_recovers() {
    let fx = Fx::new(3).await;
    let (mut b, port) = backends(&fx, &["steady", "flaky"], 11).await;
    let steady = fx.server("steady", 11);
    let flaky = fx.server("flaky", 12);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "failover",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(steady), server_target(flaky)]),
        ))
        .await;
    fx.wait_health(lb, steady, 8080, "healthy").await;
    fx.wait_health(lb, flaky, 8080, "healthy").await;

    b[1].stop().await;
    fx.wait_health(lb, flaky, 8080, "unhealthy").await;
    let check = fx.h.data_plane_checks().into_iter().find(|c| c.server == Some(flaky)).unwrap();
    assert!(check.consecutive_failures >= 2, "unhealthy only after the retries: {check:?}");
    assert!(check.last_error.is_some(), "{check:?}");
    assert_eq!(fx.health(lb, steady, 8080).await, "healthy");
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    for _ in 0..4 {
        assert_eq!(get(addr).await.as_deref(), Some("steady"), "traffic avoids the unhealthy target");
    }

    b[1].restart().await;
    fx.wait_health(lb, flaky, 8080, "healthy").await;
    let before = b[1].served();
    for _ in 0..4 {
        get(addr).await.expect("an answer");
    }
    assert_eq!(b[1].served() - before, 2, "the recovered target gets its share again");
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn http_health_checks_judge_path_host_and_status_codes() {
    let fx = Fx::new(4).await;
    let (b, port) = backends(&fx, &["good", "failing"], 11).await;
    b[1].health_status.store(500, std::sync::atomic::Ordering::SeqCst);
    let good = fx.server("good", 11);
    let failing = fx.server("failing", 12);
    let check = json!({"protocol": "http", "port": port, "interval": 1, "timeout": 1, "retries": 1,
                       "http": {"domain": "health.example", "path": "/healthz", "status_codes": ["2??", "3??"]}});
    let (lb, ip) = fx
        .create_lb(lb_body(
            "checked",
            "round_robin",
            json!([tcp_service(8080, port, check)]),
            json!([server_target(good), server_target(failing)]),
        ))
        .await;
    fx.wait_health(lb, good, 8080, "healthy").await;
    fx.wait_health(lb, failing, 8080, "unhealthy").await;
    let c = fx.h.data_plane_checks().into_iter().find(|c| c.server == Some(failing)).unwrap();
    assert!(c.last_error.as_deref().unwrap_or("").contains("500"), "{c:?}");
    assert_eq!(c.protocol, "http");
    assert_eq!(c.address, Some(b[1].addr));
    assert!(b[0].seen.health_hosts.lock().unwrap().iter().all(|h| h == "health.example"));
    assert!(!b[0].seen.health_hosts.lock().unwrap().is_empty());

    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    for _ in 0..3 {
        assert_eq!(get(addr).await.as_deref(), Some("good"));
    }
    assert_eq!(b[1].served(), 0);

    // The path answers 200 again: healthy after one success.
    b[1].health_status.store(204, std::sync::atomic::Ordering::SeqCst);
    fx.wait_health(lb, failing, 8080, "healthy").await;

    // A changed health check starts over from `unknown` and judges the new status codes.
    let (status, body) = fx
        .api(
            Method::POST,
            &format!("/load_balancers/{lb}/actions/update_service"),
            Some(json!({"listen_port": 8080, "health_check": {"http": {"status_codes": ["200"]}}})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    fx.wait_health(lb, failing, 8080, "unhealthy").await;
    fx.wait_health(lb, good, 8080, "healthy").await;
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn proxy_protocol_header_precedes_the_payload() {
    let fx = Fx::new(5).await;
    let (b, port) = backends(&fx, &["pp"], 11).await;
    let s = fx.server("pp", 11);
    let mut service = tcp_service(8443, port, tcp_check(port, 2));
    service["proxyprotocol"] = json!(true);
    let (lb, ip) = fx.create_lb(lb_body("proxied", "round_robin", json!([service]), json!([server_target(s)]))).await;
    fx.wait_health(lb, s, 8443, "healthy").await;

    let lb_addr = SocketAddr::new(IpAddr::V4(ip), 8443);
    let mut stream = TcpStream::connect(lb_addr).await.unwrap();
    let local = stream.local_addr().unwrap();
    let payload = b"GET /pp HTTP/1.1\r\nHost: lb\r\n\r\n";
    stream.write_all(payload).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert!(answer.ends_with(b"pp"));

    let raw = b[0].seen.raw.lock().unwrap().last().cloned().unwrap();
    let header = format!("PROXY TCP4 {} {} {} 8443\r\n", local.ip(), ip, local.port());
    let mut want = header.into_bytes();
    want.extend_from_slice(payload);
    assert_eq!(String::from_utf8_lossy(&raw), String::from_utf8_lossy(&want));
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn proxy_protocol_version_2_when_configured() {
    let dp = DataPlaneConfig::parse("127.10.6.0/24").unwrap().with_proxy_protocol(ProxyProtocolVersion::V2);
    let fx = Fx::with(6, dp).await;
    let (b, port) = backends(&fx, &["pp2"], 11).await;
    let s = fx.server("pp2", 11);
    let mut service = tcp_service(8443, port, tcp_check(port, 2));
    service["proxyprotocol"] = json!(true);
    let (lb, ip) = fx.create_lb(lb_body("proxied2", "round_robin", json!([service]), json!([server_target(s)]))).await;
    fx.wait_health(lb, s, 8443, "healthy").await;
    let mut stream = TcpStream::connect(SocketAddr::new(IpAddr::V4(ip), 8443)).await.unwrap();
    let local = stream.local_addr().unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let raw = b[0].seen.raw.lock().unwrap().last().cloned().unwrap();
    let IpAddr::V4(src) = local.ip() else { panic!("IPv4 client") };
    let mut want = vec![0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C];
    want.extend_from_slice(&src.octets());
    want.extend_from_slice(&ip.octets());
    want.extend_from_slice(&local.port().to_be_bytes());
    want.extend_from_slice(&8443u16.to_be_bytes());
    want.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(raw, want);
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn least_connections_prefers_the_idle_target() {
    let fx = Fx::new(7).await;
    let (b, port) = backends(&fx, &["left", "right"], 11).await;
    let left = fx.server("left", 11);
    let right = fx.server("right", 12);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "least",
            "least_connections",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(left), server_target(right)]),
        ))
        .await;
    fx.wait_health(lb, left, 8080, "healthy").await;
    fx.wait_health(lb, right, 8080, "healthy").await;
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);

    // Hold one connection open (no request yet): one target is busy.
    let held = TcpStream::connect(addr).await.unwrap();
    let busy = eventually("one target with an open connection", || async {
        let checks = fx.h.data_plane_checks();
        let busy: Vec<u64> = checks.iter().filter(|c| c.active_connections == 1).filter_map(|c| c.server).collect();
        (busy.len() == 1).then(|| busy[0])
    })
    .await;
    let idle_name = if busy == left { "right" } else { "left" };
    for _ in 0..4 {
        assert_eq!(get(addr).await.as_deref(), Some(idle_name), "the idle target gets every new connection");
    }
    drop(held);
    eventually("the held connection closed", || async {
        fx.h.data_plane_checks().iter().all(|c| c.active_connections == 0).then_some(())
    })
    .await;
    assert_eq!(b.iter().map(|b| b.served()).sum::<u64>(), 4);
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn deleting_the_service_or_the_load_balancer_closes_the_listener() {
    let fx = Fx::new(8).await;
    let (_b, port) = backends(&fx, &["only"], 11).await;
    let target = fx.backend_ip(11);
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let mut body = lb_body(
        "doomed",
        "round_robin",
        json!([tcp_service(8080, port, tcp_check(port, 2)), tcp_service(8081, port, tcp_check(port, 2))]),
        json!([{"type": "ip", "ip": {"ip": target.to_string()}}]),
    );
    body["network"] = json!(net);
    let (lb, ip) = fx.create_lb(body).await;
    fx.wait_health(lb, target, 8080, "healthy").await;
    fx.wait_health(lb, target, 8081, "healthy").await;
    let (a80, a81) = (SocketAddr::new(IpAddr::V4(ip), 8080), SocketAddr::new(IpAddr::V4(ip), 8081));
    assert_eq!(get(a81).await.as_deref(), Some("only"));

    let (status, body) = fx
        .api(Method::POST, &format!("/load_balancers/{lb}/actions/delete_service"), Some(json!({"listen_port": 8081})))
        .await;
    assert_eq!(status, 201, "{body}");
    eventually("8081 closed", || async { refused(a81).await.then_some(()) }).await;
    assert_eq!(get(a80).await.as_deref(), Some("only"), "the other service still serves");
    assert!(fx.h.data_plane_checks().iter().all(|c| c.listen_port == 8080));

    // Disabling the public interface closes the rest; enabling it opens it again.
    let (status, body) =
        fx.api(Method::POST, &format!("/load_balancers/{lb}/actions/disable_public_interface"), Some(json!({}))).await;
    assert_eq!(status, 201, "{body}");
    eventually("8080 closed", || async { refused(a80).await.then_some(()) }).await;
    assert!(fx.h.data_plane_listeners().is_empty());
    assert_eq!(fx.h.data_plane_checks().len(), 1, "health checks go on without the public interface");
    let (status, body) =
        fx.api(Method::POST, &format!("/load_balancers/{lb}/actions/enable_public_interface"), Some(json!({}))).await;
    assert_eq!(status, 201, "{body}");
    eventually("8080 open again", || async { get(a80).await.filter(|n| n == "only") }).await;

    let (status, body) = fx.api(Method::DELETE, &format!("/load_balancers/{lb}"), None).await;
    assert_eq!(status, 200, "{body}");
    eventually("8080 closed", || async { refused(a80).await.then_some(()) }).await;
    eventually("nothing left", || async {
        let dp = fx.h.data_plane();
        (dp.listeners.is_empty() && dp.checks.is_empty()).then_some(())
    })
    .await;
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn use_private_ip_targets_go_to_the_private_ip() {
    let fx = Fx::new(9).await;
    // The public address has a backend that must see nothing.
    let (public, port) = backends(&fx, &["public"], 11).await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let s =
        fx.h.seed_server(
            &SeedServer { public_ipv4: Some(fx.backend_ip(11).to_string()), ..SeedServer::new("node") }
                .network_ip(net, "10.0.0.7"),
        )
        .unwrap();
    let mut body = lb_body(
        "private",
        "round_robin",
        json!([tcp_service(8080, port, tcp_check(port, 1))]),
        json!([{"type": "server", "server": {"id": s}, "use_private_ip": true}]),
    );
    body["network"] = json!(net);
    let (lb, ip) = fx.create_lb(body).await;
    let private = SocketAddr::new(IpAddr::V4([10, 0, 0, 7].into()), port);
    let listener = eventually("a listener", || async { fx.h.data_plane_listeners().into_iter().next() }).await;
    assert_eq!(listener.targets.len(), 1);
    assert_eq!(listener.targets[0].server, Some(s));
    assert_eq!(listener.targets[0].address, Some(private), "forwarding goes to the private IP");
    let check = eventually("a check", || async { fx.h.data_plane_checks().into_iter().next() }).await;
    assert_eq!(check.address, Some(private), "health checks go to the private IP");
    // Forced healthy, a connection is forwarded to the private IP, never to the public one.
    fx.h.set_target_health(lb, &TargetHealthOverride::server(s, "healthy")).unwrap();
    let _ = get(SocketAddr::new(IpAddr::V4(ip), 8080)).await;
    assert_eq!(public[0].seen.answered.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(public[0].seen.raw.lock().unwrap().is_empty());
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn a_test_override_wins_over_the_checks_for_the_api_and_for_traffic() {
    let fx = Fx::new(10).await;
    let (b, port) = backends(&fx, &["a", "b"], 11).await;
    let a = fx.server("a", 11);
    let c = fx.server("b", 12);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "override",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(a), server_target(c)]),
        ))
        .await;
    fx.wait_health(lb, a, 8080, "healthy").await;
    fx.wait_health(lb, c, 8080, "healthy").await;
    fx.h.set_target_health(lb, &TargetHealthOverride::server(c, "unhealthy")).unwrap();
    assert_eq!(fx.health(lb, c, 8080).await, "unhealthy");
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    for _ in 0..3 {
        assert_eq!(get(addr).await.as_deref(), Some("a"));
    }
    assert_eq!(b[1].served(), 0);
    // The checks themselves still found it healthy.
    let check = fx.h.data_plane_checks().into_iter().find(|x| x.server == Some(c)).unwrap();
    assert_eq!(check.status, "healthy");
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn no_healthy_target_closes_the_connection_at_once() {
    let fx = Fx::new(11).await;
    let port = TcpListener::bind("127.0.11.11:0").await.unwrap().local_addr().unwrap().port();
    let s = fx.server("down", 11);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "empty",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 1))]),
            json!([server_target(s)]),
        ))
        .await;
    // Before the first check the target is unknown; with nothing listening it turns unhealthy.
    fx.wait_health(lb, s, 8080, "unhealthy").await;
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "closed without an answer: {n:?}");
    eventually("the rejection counted", || async {
        fx.h.data_plane_listeners().first().filter(|l| l.rejected_connections == 1).map(|_| ())
    })
    .await;
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn bind_errors_are_reported_and_retried_without_stopping_the_fake() {
    let fx = Fx::new(12).await;
    // The first Load Balancer gets the first address of the range; take its port first.
    let blocker = TcpListener::bind("127.10.12.1:8080").await.unwrap();
    let (_b, port) = backends(&fx, &["x"], 11).await;
    let s = fx.server("x", 11);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "blocked",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(s)]),
        ))
        .await;
    assert_eq!(ip, std::net::Ipv4Addr::new(127, 10, 12, 1));
    let failed = eventually("a bind error", || async {
        fx.h.data_plane_listeners().into_iter().find(|l| l.state == ListenerState::BindFailed)
    })
    .await;
    assert!(failed.error.as_deref().unwrap_or("").to_lowercase().contains("in use"), "{failed:?}");
    // The control surface shows it too, and the API keeps answering.
    let dp: serde_json::Value =
        fx.client.get(format!("{}/data_plane", fx.fake.control_url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(dp["listeners"][0]["state"], "bind_failed", "{dp}");
    assert_eq!(fx.api(Method::GET, &format!("/load_balancers/{lb}"), None).await.0, 200);
    drop(blocker);
    eventually("listening once the address is free", || async {
        fx.h.data_plane_listeners().into_iter().find(|l| l.state == ListenerState::Listening)
    })
    .await;
    fx.wait_health(lb, s, 8080, "healthy").await;
    assert_eq!(get(SocketAddr::new(IpAddr::V4(ip), 8080)).await.as_deref(), Some("x"));
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn shutdown_and_reset_leave_nothing_behind() {
    let fx = Fx::new(13).await;
    let (_b, port) = backends(&fx, &["y"], 11).await;
    let s = fx.server("y", 11);
    let (lb, ip) = fx
        .create_lb(lb_body(
            "short",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(s)]),
        ))
        .await;
    fx.wait_health(lb, s, 8080, "healthy").await;
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    // A forwarded connection stays open until the data plane stops.
    let mut open = TcpStream::connect(addr).await.unwrap();
    eventually("the connection forwarded", || async {
        fx.h.data_plane_listeners().first().filter(|l| l.active_connections == 1).map(|_| ())
    })
    .await;

    // A reset forgets the Load Balancer: its listener closes.
    fx.h.reset();
    eventually("closed by the reset", || async { refused(addr).await.then_some(()) }).await;
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "the forwarded connection was closed");

    // The same address serves again after a new Load Balancer took it, until shutdown.
    let s = fx.server("y", 11);
    let (lb, ip2) = fx
        .create_lb(lb_body(
            "again",
            "round_robin",
            json!([tcp_service(8080, port, tcp_check(port, 2))]),
            json!([server_target(s)]),
        ))
        .await;
    assert_eq!(ip2, ip, "the range starts over");
    fx.wait_health(lb, s, 8080, "healthy").await;
    assert_eq!(get(addr).await.as_deref(), Some("y"));
    let h = fx.h.clone();
    fx.fake.shutdown().await;
    assert!(refused(addr).await, "nothing listens after shutdown");
    let dp = h.data_plane();
    assert!(!dp.running && dp.listeners.is_empty() && dp.checks.is_empty(), "{dp:?}");
}

#[tokio::test]
async fn with_the_data_plane_off_nothing_changes() {
    let config = FakeConfig { log_requests: false, ..FakeConfig::default() }.with_action_delay(Duration::ZERO);
    let fake = FakeServer::start(config).await.unwrap();
    let h = fake.handle();
    let s =
        h.seed_server(&SeedServer { public_ipv4: Some("127.0.14.11".to_owned()), ..SeedServer::new("plain") }).unwrap();
    let resp: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/load_balancers", fake.base_url()))
        .bearer_auth("t")
        .json(&lb_body(
            "plain",
            "round_robin",
            json!([tcp_service(8080, 80, tcp_check(80, 3))]),
            json!([server_target(s)]),
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let lb = &resp["load_balancer"];
    assert!(lb["public_net"]["ipv4"]["ip"].as_str().unwrap().starts_with("198.18."), "{lb}");
    // Health as before: a running server is healthy at once.
    let id = lb["id"].as_u64().unwrap();
    let got = h.load_balancer(id).unwrap();
    assert_eq!(got.targets[0].health_status.as_ref().unwrap()[0].status, "healthy");
    let dp = h.data_plane();
    assert!(!dp.enabled && !dp.running && dp.listeners.is_empty() && dp.checks.is_empty(), "{dp:?}");
    let body: serde_json::Value =
        reqwest::get(format!("{}/data_plane", fake.control_url())).await.unwrap().json().await.unwrap();
    assert_eq!(body["enabled"], false);
    fake.shutdown().await;
}
