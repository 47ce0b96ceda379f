//! Test harness of the data plane tests: a fake with the data plane on a /24 of its own,
//! backends that answer with their name, raw HTTP over TCP, and polling with a deadline.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hcloud_fake::control::SeedServer;
use hcloud_fake::{DataPlaneConfig, FakeConfig, FakeHandle, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub const TOKEN: &str = "data-plane-test";
/// How long a condition may take (health checks run at 1 s intervals).
pub const DEADLINE: Duration = Duration::from_secs(15);

/// Polls `f` every 25 ms until it returns `Some`, failing with `what` after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A fake whose Load Balancers take addresses from `127.10.<block>.0/24`, with instant actions.
pub struct Fx {
    pub fake: FakeServer,
    pub h: FakeHandle,
    pub client: reqwest::Client,
    /// The block of this test: backends live on `127.0.<block>.x`, Load Balancers on
    /// `127.10.<block>.x` (tests run in parallel).
    pub block: u8,
}

impl Fx {
    pub async fn new(block: u8) -> Self {
        let dp = DataPlaneConfig::parse(&format!("127.10.{block}.0/24")).expect("valid range");
        Self::with(block, dp).await
    }

    pub async fn with(block: u8, dp: DataPlaneConfig) -> Self {
        let config = FakeConfig { log_requests: false, ..FakeConfig::default() }
            .with_action_delay(Duration::ZERO)
            .with_load_balancer_data_plane(dp);
        let fake = FakeServer::start(config).await.expect("fake starts");
        let h = fake.handle();
        Self { fake, h, client: reqwest::Client::new(), block }
    }

    /// `127.0.<block>.<n>`.
    pub fn backend_ip(&self, n: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, 0, self.block, n)
    }

    /// Seeds a running server whose public IPv4 is `127.0.<block>.<n>`.
    pub fn server(&self, name: &str, n: u8) -> u64 {
        let seed = SeedServer { public_ipv4: Some(self.backend_ip(n).to_string()), ..SeedServer::new(name) };
        self.h.seed_server(&seed).expect("server seeded")
    }

    pub async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.fake.base_url())).bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("API answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("JSON") })
    }

    /// Creates a Load Balancer through the public API; returns (id, public IPv4).
    pub async fn create_lb(&self, body: Value) -> (u64, Ipv4Addr) {
        let (status, body) = self.api(reqwest::Method::POST, "/load_balancers", Some(body)).await;
        assert_eq!(status, 201, "{body}");
        let lb = &body["load_balancer"];
        let ip = lb["public_net"]["ipv4"]["ip"].as_str().expect("public IPv4").parse().expect("IPv4");
        (lb["id"].as_u64().expect("id"), ip)
    }

    /// The health the API reports for a target (a server target, or a server selected by a
    /// label selector, or an IP target) on `listen_port`.
    pub async fn health(&self, lb: u64, target: impl Into<Target>, listen_port: u16) -> String {
        let target = target.into();
        let (status, body) = self.api(reqwest::Method::GET, &format!("/load_balancers/{lb}"), None).await;
        assert_eq!(status, 200, "{body}");
        let is = |t: &Value| match &target {
            Target::Server(id) => t["server"]["id"].as_u64() == Some(*id),
            Target::Ip(ip) => t["ip"]["ip"].as_str() == Some(ip.as_str()),
        };
        let mut statuses = Vec::new();
        for t in body["load_balancer"]["targets"].as_array().into_iter().flatten() {
            if is(t) {
                statuses.extend(t["health_status"].as_array().cloned().unwrap_or_default());
            }
            for s in t["targets"].as_array().into_iter().flatten() {
                if is(s) {
                    statuses.extend(s["health_status"].as_array().cloned().unwrap_or_default());
                }
            }
        }
        statuses
            .iter()
            .find(|s| s["listen_port"].as_u64() == Some(u64::from(listen_port)))
            .and_then(|s| s["status"].as_str())
            .unwrap_or("missing")
            .to_owned()
    }

    /// Waits until the API reports `want` for a target.
    pub async fn wait_health(&self, lb: u64, target: impl Into<Target>, listen_port: u16, want: &str) {
        let target = target.into();
        eventually(&format!("{target:?} {want} on {listen_port}"), || async {
            (self.health(lb, target.clone(), listen_port).await == want).then_some(())
        })
        .await;
    }
}

/// A target as the API lists it.
#[derive(Debug, Clone)]
pub enum Target {
    /// A server (directly or through a label selector).
    Server(u64),
    /// An IP target.
    Ip(String),
}

impl From<u64> for Target {
    fn from(id: u64) -> Self {
        Self::Server(id)
    }
}

impl From<Ipv4Addr> for Target {
    fn from(ip: Ipv4Addr) -> Self {
        Self::Ip(ip.to_string())
    }
}

/// What a backend saw.
#[derive(Default)]
pub struct Seen {
    /// Requests answered (health checks included).
    pub answered: AtomicU64,
    /// Requests answered that were not health checks (path other than `/healthz`).
    pub served: AtomicU64,
    /// The raw bytes of every connection that sent something, in order.
    pub raw: Mutex<Vec<Vec<u8>>>,
    /// `Host` headers of `/healthz` requests.
    pub health_hosts: Mutex<Vec<String>>,
}

/// A tiny HTTP/1.1 server on `<ip>:<port>` answering every request with its name, and
/// `/healthz` with `health_status` (200 at first).
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    pub health_status: Arc<AtomicU16>,
    task: Option<JoinHandle<()>>,
}

impl Backend {
    pub async fn start(name: &str, addr: SocketAddr) -> Self {
        let mut b = Self {
            name: name.to_owned(),
            addr,
            seen: Arc::new(Seen::default()),
            health_status: Arc::new(AtomicU16::new(200)),
            task: None,
        };
        b.restart().await;
        b
    }

    /// (Re)binds the address and serves.
    pub async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.unwrap_or_else(|e| panic!("bind {}: {e}", self.addr));
        self.addr = listener.local_addr().expect("local address");
        let (name, seen, health) = (self.name.clone(), Arc::clone(&self.seen), Arc::clone(&self.health_status));
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    Ok((stream, _)) = listener.accept() => {
                        conns.spawn(answer(stream, name.clone(), Arc::clone(&seen), Arc::clone(&health)));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        }));
    }

    /// Stops serving: the socket closes and open connections are dropped.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    pub fn served(&self) -> u64 {
        self.seen.served.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn answer(mut stream: TcpStream, name: String, seen: Arc<Seen>, health: Arc<AtomicU16>) {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 1024];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
    if raw.is_empty() {
        return; // a TCP health check: connect, close
    }
    seen.raw.lock().expect("lock").push(raw.clone());
    let text = String::from_utf8_lossy(&raw).into_owned();
    let is_health = text.contains("GET /healthz ");
    let status = if is_health {
        if let Some(host) = text.lines().find_map(|l| l.strip_prefix("Host: ")) {
            seen.health_hosts.lock().expect("lock").push(host.to_owned());
        }
        health.load(Ordering::SeqCst)
    } else {
        seen.served.fetch_add(1, Ordering::SeqCst);
        200
    };
    seen.answered.fetch_add(1, Ordering::SeqCst);
    let reply = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}", name.len());
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Sends `GET /` to `addr` over a fresh connection; returns the body (the backend's name), or
/// `None` when the connection is refused or closed without an answer.
pub async fn get(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n").await.ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.ok()?;
    let text = String::from_utf8(answer).ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some(body.to_owned())
}

/// Whether connecting to `addr` is refused.
pub async fn refused(addr: SocketAddr) -> bool {
    matches!(TcpStream::connect(addr).await, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// A service body for `POST /load_balancers`: tcp, with a health check every second.
pub fn tcp_service(listen_port: u16, destination_port: u16, health_check: Value) -> Value {
    json!({"protocol": "tcp", "listen_port": listen_port, "destination_port": destination_port,
           "health_check": health_check})
}

/// A TCP health check on `port`: every second, timeout 1 s, `retries` retries.
pub fn tcp_check(port: u16, retries: u64) -> Value {
    json!({"protocol": "tcp", "port": port, "interval": 1, "timeout": 1, "retries": retries})
}

/// Starts backends named `names` on `127.0.<block>.<first..>` sharing one free port; returns
/// them and the port.
pub async fn backends(fx: &Fx, names: &[&str], first: u8) -> (Vec<Backend>, u16) {
    let mut out: Vec<Backend> = Vec::new();
    let mut port = 0;
    for (i, name) in names.iter().enumerate() {
        let offset = u8::try_from(i).expect("few backends");
        let b = Backend::start(name, SocketAddr::new(IpAddr::V4(fx.backend_ip(first + offset)), port)).await;
        port = b.addr.port();
        out.push(b);
    }
    (out, port)
}
