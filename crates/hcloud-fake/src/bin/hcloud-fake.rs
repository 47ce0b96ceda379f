//! `hcloud-fake`: serve the in-memory Hetzner Cloud API fake until SIGINT/SIGTERM.
//!
//! See `hcloud-fake --help` for flags, the control surface and the seed file format
//! (documented in [`hcloud_fake::control::Seed`]; example in `examples/seed.json`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use hcloud_fake::control::Seed;
use hcloud_fake::{
    DataPlaneConfig, FakeConfig, FakeHandle, FakeServer, ProxyProtocolVersion, RateLimitConfig, TokenPolicy,
};

const AFTER_HELP: &str = r#"API:
  http://ADDR/v1/...  Hetzner Cloud API subset, as the API is today (servers,
  networks, load_balancers, certificates, primary_ips, actions, locations,
  server_types, load_balancer_types, images (the system images), pricing;
  /datacenters answers 410 Gone). Lists take the API's filters, label_selector,
  sort and page/per_page. PUT (name, labels) on servers, networks,
  load_balancers, certificates and primary_ips. Actions:
    servers: poweron, poweroff, shutdown, reboot, reset, attach_to_network,
      detach_from_network, change_protection, change_dns_ptr
    networks: add_route, delete_route, add_subnet, delete_subnet,
      change_ip_range, change_protection
    load_balancers: add_service, update_service, delete_service, add_target,
      remove_target, attach_to_network, detach_from_network, change_type,
      change_algorithm, enable_public_interface, disable_public_interface,
      change_dns_ptr, change_protection
  Requires "Authorization: Bearer <token>"; rate limited; one log line per
  request. Hetzner's hcloud CLI works against it (hcloud config set endpoint
  http://ADDR/v1).
  http://ADDR/robot/...  Robot webservice subset (dedicated servers; use as
  ROBOT_ENDPOINT): GET /robot/server, /robot/server/{number}, /robot/reset/{number}.
  HTTP basic auth (--robot-user/--robot-password); answers wrapped like
  [{"server": {...}}]; errors {"error": {"status", "code", "message"}} with
  SERVER_NOT_FOUND (404), UNAUTHORIZED (401), RATE_LIMIT_EXCEEDED (403, injected).

CONTROL SURFACE (not Hetzner's API; no auth, no rate limit, not counted; JSON):
  GET    /_fake/state                snapshot of all resources and actions
  POST   /_fake/seed                 body: seed file format (below) -> created ids
  POST   /_fake/seed/networks        body: one network -> {"id"}
  POST   /_fake/seed/servers         body: one server -> {"id"}
  POST   /_fake/seed/servers/batch   body: {"prefix", "count", ...} -> {"ids"}
  POST   /_fake/seed/load_balancers  body: one load balancer -> {"id"}
  POST   /_fake/seed/certificates    body: one certificate -> {"id"}
  PATCH  /_fake/servers/{id}         body: {"name"?, "status"?, "labels"?, "public_ipv6"?}
                                     public_ipv6: "next" (another /64), "remove" (none)
                                     or {"net": "2001:db8:ff::/64"}; a new IPv6 Primary IP
  DELETE /_fake/servers/{id}         remove a server instantly
  PUT    /_fake/load_balancers/{id}/target_health
                                     body: {"server": ID | "ip": IP, "listen_port"?,
                                     "status": "healthy" | "unhealthy" | "unknown" | null}
                                     what the load balancer reports for that target
                                     (null: back to the default: healthy while the
                                     server runs, unhealthy otherwise; with the data
                                     plane: what the health checks found)
  GET    /_fake/data_plane           the Load Balancer data plane: {"enabled", "running",
                                     "addresses", "proxy_protocol", "listeners", "checks"}
  GET    /_fake/data_plane/listeners each service's listener: address, state
                                     ("listening" | "bind_failed"), error, connection counts
  GET    /_fake/data_plane/checks    each (service, target)'s health checks: address,
                                     status, checks, consecutive_failures, last_error,
                                     active_connections
  GET    /_fake/faults               installed faults
  POST   /_fake/faults               body: {"method"?, "path", "times"?, "latency_ms"?,
                                     and at most one answer:
                                       "error": {"status"?, "code", "message"?}
                                         the API's JSON envelope, e.g. {"code": "locked"}
                                         (423) or {"code": "conflict"} (409); the status
                                         defaults to the API's status for the code
                                       "html": {"status": 502}
                                         a text/html 5xx page as a proxy sends it
                                       "reset": "before_response" | "mid_body"
                                         TCP reset before any byte / after the headers and
                                         half of the body (mid_body runs the handler)
                                     "apply": true runs the handler first: the change takes
                                     effect and the client gets the answer above ("applied,
                                     but the answer was lost")}
                                     path like /v1/servers/{id} ({id}: numeric segment,
                                     *: any segment, trailing **: any rest); times 0 =
                                     forever
  DELETE /_fake/faults               remove all faults
  POST   /_fake/locks                body: {"type", "id"}; type: server, network,
                                     load_balancer or certificate
  DELETE /_fake/locks/{type}/{id}    unlock
  POST   /_fake/action_failures      body: {"count"?, "command"?, "code"?, "message"?}
  POST   /_fake/actions/finish       finish all running actions now
  GET    /_fake/config               current settings
  PUT    /_fake/config/action_delay  body: {"ms": 500}
  PUT    /_fake/config/action_retention
                                     body: {"ms": 3600000}; finished actions older
                                     than this are pruned (gone from /v1/actions)
  PUT    /_fake/config/rate_limit    body: {"capacity": 3600, "refill_per_second": 1.0}
  POST   /_fake/rate_limit/refill    fill the bucket
  PUT    /_fake/config/token_policy  body: {"mode": "accept_all"} or
                                     {"mode": "allow" | "deny", "tokens": [...]}
  GET    /_fake/requests             {"counts": {"total", "by_endpoint"}, "log": [...]}
                                     keys like "GET /v1/servers/{id}"; each log entry has
                                     "token_fingerprint" ("tok-" + 8 hex digits of the
                                     token's SHA-256; never the token), "fault" and
                                     "handler_status" (see the library docs)
  GET    /_fake/requests/counts      counters only
  GET    /_fake/requests/log         log only; ?token_fingerprint=tok-... filters both
                                     log endpoints to one client's requests
  DELETE /_fake/requests             reset counters and log
  POST   /_fake/reset                back to the start configuration (the seed is gone)
  GET    /_fake/robot/servers        the dedicated servers as stored
  POST   /_fake/robot/servers        body: {"name", "number"?, "product"?, "dc"?, "ipv4"?,
                                     "no_ipv4"?, "ipv6_net"?, "operating_status"?}
                                     -> {"number"} (numbers from 100001, IPv4s from
                                     198.19.0.0/16, "running" by default)
  PATCH  /_fake/robot/servers/{number}
                                     body: {"name"?, "operating_status"?, "ipv6_net"?}
  DELETE /_fake/robot/servers/{number}
                                     remove a dedicated server instantly
  GET|POST|DELETE /_fake/robot/faults
                                     as /_fake/faults, for /robot; paths relative to
                                     /robot, e.g. {"path": "/server", "times": 0,
                                     "error": {"status": 403, "code": "RATE_LIMIT_EXCEEDED"}}
  PUT    /_fake/robot/credentials    body: {"user", "password"}

SEED FILE (--seed FILE, JSON; see examples/seed.json):
  {
    "networks": [{
      "name": "k8s", "ip_range": "10.0.0.0/8", "labels": {},
      "subnets": [{"ip_range": "10.0.0.0/24", "network_zone": "eu-central"}]
    }],
    "servers": [{
      "name": "cp-1", "server_type": "cpx11", "location": "fsn1",
      "image": "ubuntu-24.04", "status": "running", "labels": {"role": "cp"},
      "enable_ipv4": true, "enable_ipv6": true,
      "public_ipv4": "198.18.100.1", "public_ipv6": "2001:db8:100::/64",
      "networks": [{"network": "k8s", "ip": "10.0.0.2", "alias_ips": []}]
    }],
    "server_batches": [{
      "prefix": "worker-", "count": 3, "server_type": "cx23",
      "networks": ["k8s"]
    }],
    "certificates": [{"name": "web", "type": "uploaded", "domain_names": ["a.example"]}],
    "robot_servers": [{"name": "bm-1", "product": "AX41-NVMe", "dc": "FSN1-DC14"}],
    "load_balancers": [{
      "name": "lb-1", "load_balancer_type": "lb11", "location": "fsn1",
      "network": "k8s",
      "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}],
      "targets": [{"type": "server", "server": {"id": 10000001},
                   "use_private_ip": true}]
    }]
  }
  Every list and every field except names, the network ip_range and the batch
  prefix/count is optional (defaults: cx23, fsn1, ubuntu-24.04, running, lb11,
  cloud subnets in eu-central). Networks are referenced by id or name. A
  certificate may carry its PEM in "certificate" (names, validity and fingerprint
  are read from it); without one a certificate for "domain_names" is issued. Ids:
  servers from 10000001, networks 20001, load balancers 30001, certificates 40001,
  primary IPs 50000001, actions 1000001.
"#;

/// In-memory fake of the Hetzner Cloud API for tests and local sandboxes.
#[derive(Debug, Parser)]
#[command(name = "hcloud-fake", version, about, after_help = AFTER_HELP)]
struct Args {
    /// Address to listen on; nothing else is bound (unless --load-balancer-data-plane is
    /// given). Port 0 picks a free port, which is printed on start.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    listen: SocketAddr,

    /// JSON seed file applied before serving (format below).
    #[arg(long, value_name = "FILE")]
    seed: Option<PathBuf>,

    /// How long actions run before they finish, e.g. 500ms, 2s, 0s (0 = immediately).
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    action_delay: Duration,

    /// How long finished actions are kept before they are pruned (gone from /v1/actions),
    /// e.g. 1h, 10m.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    action_retention: Duration,

    /// Rate limit bucket size (requests).
    #[arg(long, default_value_t = 3600, value_name = "N")]
    rate_limit_capacity: u32,

    /// Rate limit refill in tokens per second (0 = never refills).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    rate_limit_refill_per_second: f64,

    /// Accept only this bearer token (repeatable: an allow-list). Default: any non-empty
    /// token is accepted.
    #[arg(long = "token", value_name = "TOKEN")]
    tokens: Vec<String>,

    /// Reject this bearer token with 401 (repeatable: a deny-list).
    #[arg(long = "deny-token", value_name = "TOKEN")]
    deny_tokens: Vec<String>,

    /// Basic-auth user of the Robot part (/robot).
    #[arg(long, default_value = "robot", value_name = "USER")]
    robot_user: String,

    /// Basic-auth password of the Robot part (/robot).
    #[arg(long, default_value = "robot-password", value_name = "PASSWORD")]
    robot_password: String,

    /// Do not log one line per request.
    #[arg(long)]
    quiet: bool,

    /// Turn the Load Balancer data plane on: Load Balancers take their public IPv4 from RANGE
    /// (inside 127.0.0.0/8, e.g. 127.10.0.0/16; Linux answers on all of it without setup) or
    /// from a comma-separated list of addresses this machine has (e.g. 10.99.0.1,10.99.0.2),
    /// listen on <public IPv4>:<listen_port> for every service (while the public interface
    /// is enabled) and forward each TCP connection to a healthy target at its destination
    /// port (round_robin or least_connections; http/https are forwarded as plain TCP). Target
    /// health comes from real health checks (tcp connect, http GET with path, Host and status
    /// codes). 0.0.0.0 is refused. See GET /_fake/data_plane.
    #[arg(long, value_name = "RANGE|ADDRS", value_parser = DataPlaneConfig::parse)]
    load_balancer_data_plane: Option<DataPlaneConfig>,

    /// PROXY protocol version the data plane sends for services with proxyprotocol: v1
    /// (text line) or v2 (binary).
    #[arg(long, default_value = "v1", value_name = "v1|v2", requires = "load_balancer_data_plane")]
    load_balancer_proxy_protocol: ProxyProtocolVersion,
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for SIGINT: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    if !args.tokens.is_empty() && !args.deny_tokens.is_empty() {
        bail!("--token (allow-list) and --deny-token (deny-list) cannot be combined");
    }
    let token_policy = if !args.tokens.is_empty() {
        TokenPolicy::allow(args.tokens.clone())
    } else if !args.deny_tokens.is_empty() {
        TokenPolicy::deny(args.deny_tokens.clone())
    } else {
        TokenPolicy::AcceptAll
    };
    let config = FakeConfig {
        action_delay: args.action_delay,
        action_retention: args.action_retention,
        rate_limit: RateLimitConfig {
            capacity: args.rate_limit_capacity,
            refill_per_second: args.rate_limit_refill_per_second,
        },
        token_policy,
        log_requests: !args.quiet,
        robot_credentials: hcloud_fake::robot::RobotCredentials {
            user: args.robot_user.clone(),
            password: args.robot_password.clone(),
        },
        load_balancer_data_plane: args
            .load_balancer_data_plane
            .clone()
            .map(|d| d.with_proxy_protocol(args.load_balancer_proxy_protocol)),
    };
    let handle = FakeHandle::new(config);
    if let Some(path) = &args.seed {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading seed file {}", path.display()))?;
        let seed: Seed =
            serde_json::from_str(&text).with_context(|| format!("parsing seed file {}", path.display()))?;
        let created = handle.seed(&seed).with_context(|| format!("applying seed file {}", path.display()))?;
        tracing::info!(
            networks = created.networks.len(),
            servers = created.servers.len(),
            certificates = created.certificates.len(),
            load_balancers = created.load_balancers.len(),
            robot_servers = created.robot_servers.len(),
            "seeded from {}",
            path.display()
        );
    }
    let server = FakeServer::serve(args.listen, handle).await.with_context(|| format!("binding {}", args.listen))?;
    println!(
        "hcloud-fake listening on {} (API: {}, Robot: {}, control: {})",
        server.addr(),
        server.base_url(),
        server.robot_url(),
        server.control_url()
    );
    if let Some(dp) = &server.handle().data_plane().addresses {
        println!("Load Balancer data plane on: addresses {dp}; see {}/data_plane", server.control_url());
    }
    server.run_until(shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}
