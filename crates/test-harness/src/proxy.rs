//! [`TcpProxy`]: a loopback TCP forwarder a test can cut or stall, to partition a component
//! from the API server (or any other TCP service) and heal the partition again.
//!
//! It runs on plain threads, not on a tokio runtime, so it keeps working across
//! `#[tokio::test]` runtimes and while a runtime is blocked. TLS passes through untouched: a
//! client that connects to `https://127.0.0.1:<proxy port>` still verifies the API server's
//! certificate, which is valid for the IP address 127.0.0.1.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use sync_lock::Unpoison as _;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::control_plane::ControlPlane;
use crate::error::HarnessError;

/// How long the proxy waits to connect to its target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward in both directions.
    Forward,
    /// Live connections were closed; new ones are accepted and closed at once (the client sees
    /// the connection end before any byte arrives).
    Cut,
    /// Nothing is forwarded: live connections stall (bytes already read are held back, and
    /// the kernel buffers fill up), new connections are accepted but never connected to the
    /// target. Like a network partition; [`TcpProxy::restore`] delivers the held bytes.
    Blackhole,
    /// What clients send reaches the target, but the first bytes the target sends back close
    /// the connection instead of reaching the client: a request goes out, the target acts on
    /// it, and the client sees the connection end without an answer (an answer lost after
    /// the server stored a write). A TLS client's new connections end in the handshake, so
    /// nothing more is sent until [`TcpProxy::restore`].
    LoseAnswers,
}

/// A TCP proxy on `127.0.0.1:<free port>` forwarding to one target.
///
/// Dropping it closes the listener and every connection.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    target: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    mode: Mutex<ProxyMode>,
    mode_changed: Condvar,
    /// Clones of every open socket (client and target side), by connection id, so `cut` can
    /// shut them down and wake the threads blocked on them.
    live: Mutex<HashMap<u64, Vec<TcpStream>>>,
    next_id: AtomicU64,
    accepted: AtomicU64,
    closing: AtomicBool,
}

impl Shared {
    fn mode(&self) -> ProxyMode {
        *self.mode.lock_unpoisoned()
    }

    /// Blocks while blackholed; true when traffic may flow, false when the connection must
    /// close (cut, or the proxy is shutting down).
    fn wait_forwarding(&self) -> bool {
        let mut mode = self.mode.lock_unpoisoned();
        while *mode == ProxyMode::Blackhole && !self.closing.load(Ordering::SeqCst) {
            mode = sync_lock::wait_unpoisoned(&self.mode_changed, mode);
        }
        matches!(*mode, ProxyMode::Forward | ProxyMode::LoseAnswers) && !self.closing.load(Ordering::SeqCst)
    }

    fn set_mode(&self, mode: ProxyMode) {
        *self.mode.lock_unpoisoned() = mode;
        self.mode_changed.notify_all();
        if mode == ProxyMode::Cut {
            self.close_all();
        }
    }

    fn close_all(&self) {
        for sockets in self.live.lock_unpoisoned().drain().map(|(_, sockets)| sockets) {
            for socket in sockets {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }

    fn register(&self, id: u64, socket: &TcpStream) -> bool {
        let Ok(clone) = socket.try_clone() else { return false };
        self.live.lock_unpoisoned().entry(id).or_default().push(clone);
        true
    }

    fn forget(&self, id: u64) {
        if let Some(sockets) = self.live.lock_unpoisoned().remove(&id) {
            for socket in sockets {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

impl TcpProxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> Result<TcpProxy, HarnessError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| HarnessError::io("binding the proxy", e))?;
        let addr = listener.local_addr().map_err(|e| HarnessError::io("reading the proxy's address", e))?;
        let shared = Arc::new(Shared {
            mode: Mutex::new(ProxyMode::Forward),
            mode_changed: Condvar::new(),
            live: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        });
        let acceptor = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("proxy-{}", addr.port()))
                .spawn(move || accept_loop(&listener, target, &shared))
                .map_err(|e| HarnessError::io("starting the proxy thread", e))?
        };
        Ok(TcpProxy { addr, target, shared, acceptor: Some(acceptor) })
    }

    /// The listening address (127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The target address.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// `https://127.0.0.1:<port>`: the server URL for clients of an HTTPS target such as the
    /// API server.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Closes every live connection and closes new ones at once, until [`Self::restore`].
    pub fn cut(&self) {
        tracing::info!(proxy = %self.addr, target = %self.target, "proxy: cutting all connections");
        self.shared.set_mode(ProxyMode::Cut);
    }

    /// Stalls all traffic, live and new, until [`Self::restore`] (or [`Self::cut`]).
    pub fn blackhole(&self) {
        tracing::info!(proxy = %self.addr, target = %self.target, "proxy: blackholing all traffic");
        self.shared.set_mode(ProxyMode::Blackhole);
    }

    /// Forwards what clients send, and closes each connection when the target answers, until
    /// [`Self::restore`] (see [`ProxyMode::LoseAnswers`]).
    pub fn lose_answers(&self) {
        tracing::info!(proxy = %self.addr, target = %self.target, "proxy: losing the target's answers");
        self.shared.set_mode(ProxyMode::LoseAnswers);
    }

    /// Forwards again (stalled connections resume with the bytes they held).
    pub fn restore(&self) {
        tracing::info!(proxy = %self.addr, target = %self.target, "proxy: forwarding again");
        self.shared.set_mode(ProxyMode::Forward);
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        self.shared.mode()
    }

    /// Connections accepted so far (including those closed at once while cut).
    pub fn accepted_connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections open right now.
    pub fn live_connections(&self) -> usize {
        self.shared.live.lock_unpoisoned().len()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.mode_changed.notify_all();
        self.shared.close_all();
        // Wake the blocking accept so the thread sees `closing`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.mode() == ProxyMode::Cut {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        if !shared.register(id, &client) {
            continue;
        }
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("proxy-conn-{id}"))
            .spawn(move || connection(id, client, target, &shared));
        if spawned.is_err() {
            tracing::warn!("proxy: could not start a connection thread");
        }
    }
}

/// One proxied connection: wait out a blackhole, connect to the target, pump both ways until
/// either side ends or the proxy cuts.
fn connection(id: u64, client: TcpStream, target: SocketAddr, shared: &Arc<Shared>) {
    if !shared.wait_forwarding() {
        shared.forget(id);
        return;
    }
    let upstream = match TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
        Ok(upstream) => upstream,
        Err(error) => {
            tracing::debug!(%target, %error, "proxy: cannot reach the target");
            shared.forget(id);
            return;
        }
    };
    // A cut may have happened while we connected: it drained `live` without our new socket.
    if !shared.register(id, &upstream)
        || shared.mode() == ProxyMode::Cut
        || !shared.live.lock_unpoisoned().contains_key(&id)
    {
        let _ = upstream.shutdown(Shutdown::Both);
        shared.forget(id);
        return;
    }
    let (Ok(client_reader), Ok(upstream_reader)) = (client.try_clone(), upstream.try_clone()) else {
        shared.forget(id);
        return;
    };
    let back = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("proxy-conn-{id}-back"))
            .spawn(move || pump(upstream_reader, client, &shared, true))
    };
    pump(client_reader, upstream, shared, false);
    // Either direction ending ends the connection (no half-close; HTTP clients do not need it).
    shared.forget(id);
    if let Ok(back) = back {
        let _ = back.join();
    }
}

/// Copies `from` to `to`; `answers`: this is the target's side (lost in
/// [`ProxyMode::LoseAnswers`]).
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, answers: bool) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !shared.wait_forwarding() || (answers && shared.mode() == ProxyMode::LoseAnswers) {
            break;
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// A client from `kubeconfig` (current context) whose server URL is replaced by `server_url`,
/// e.g. [`TcpProxy::https_url`].
pub async fn client_with_server(kubeconfig: &Path, server_url: &str) -> Result<Client, HarnessError> {
    let kubeconfig_error =
        |message: String| HarnessError::Kubeconfig { path: kubeconfig.display().to_string(), message };
    let config = Kubeconfig::read_from(kubeconfig).map_err(|e| kubeconfig_error(e.to_string()))?;
    let mut config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| kubeconfig_error(e.to_string()))?;
    config.cluster_url = server_url.parse().map_err(|e| kubeconfig_error(format!("server URL {server_url:?}: {e}")))?;
    Client::try_from(config).map_err(|e| HarnessError::kube(format!("building a client for {server_url}"), e))
}

/// Writes a copy of `kubeconfig` whose clusters all point at `server_url` to `out` (as JSON,
/// which every kubeconfig reader accepts), for child processes that take `--kubeconfig`.
pub fn kubeconfig_with_server(kubeconfig: &Path, server_url: &str, out: &Path) -> Result<(), HarnessError> {
    let kubeconfig_error =
        |message: String| HarnessError::Kubeconfig { path: kubeconfig.display().to_string(), message };
    let mut config = Kubeconfig::read_from(kubeconfig).map_err(|e| kubeconfig_error(e.to_string()))?;
    for cluster in &mut config.clusters {
        if let Some(cluster) = cluster.cluster.as_mut() {
            cluster.server = Some(server_url.to_owned());
        }
    }
    let text = serde_json::to_string_pretty(&config).map_err(|e| kubeconfig_error(e.to_string()))?;
    std::fs::write(out, text).map_err(|e| HarnessError::io(format!("writing {}", out.display()), e))
}

impl ControlPlane {
    /// The API server's address (`127.0.0.1:<port>`), e.g. as a [`TcpProxy`] target.
    pub fn apiserver_addr(&self) -> Result<SocketAddr, HarnessError> {
        let host_port = self.server_url().trim_start_matches("https://");
        host_port.parse().map_err(|e| {
            HarnessError::Assets(format!("the API server URL {:?} is not https://<ip>:<port>: {e}", self.server_url()))
        })
    }

    /// A new [`TcpProxy`] in front of the API server.
    pub fn apiserver_proxy(&self) -> Result<TcpProxy, HarnessError> {
        TcpProxy::start(self.apiserver_addr()?)
    }

    /// A client with the identity of `kubeconfig` (one of this control plane's kubeconfigs)
    /// that reaches the API server through `proxy`.
    pub async fn client_via(&self, kubeconfig: &Path, proxy: &TcpProxy) -> Result<Client, HarnessError> {
        client_with_server(kubeconfig, &proxy.https_url()).await
    }

    /// A kubeconfig file with the identity of `kubeconfig` that reaches the API server through
    /// `proxy` (written into the control plane's directory; for child processes).
    pub fn kubeconfig_via(&self, kubeconfig: &Path, proxy: &TcpProxy) -> Result<PathBuf, HarnessError> {
        let stem = kubeconfig.file_stem().and_then(|s| s.to_str()).unwrap_or("kubeconfig");
        let out = self.dir().join(format!("{stem}-via-{}.kubeconfig", proxy.port()));
        kubeconfig_with_server(kubeconfig, &proxy.https_url(), &out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use std::time::Instant;

    /// An echo server on a free port; it runs until the test process ends.
    fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut reader = stream.try_clone().expect("clone");
                    let mut writer = stream;
                    let _ = std::io::copy(&mut reader, &mut writer);
                });
            }
        });
        addr
    }

    fn connect(proxy: &TcpProxy) -> TcpStream {
        let stream = TcpStream::connect(proxy.addr()).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        stream
    }

    fn echo(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(message)?;
        let mut answer = vec![0u8; message.len()];
        stream.read_exact(&mut answer)?;
        Ok(answer)
    }

    fn wait(description: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {description}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn forwards_both_ways() {
        let proxy = TcpProxy::start(echo_server()).expect("proxy");
        assert_eq!(proxy.mode(), ProxyMode::Forward);
        assert!(proxy.https_url().starts_with("https://127.0.0.1:"));
        let mut stream = connect(&proxy);
        assert_eq!(echo(&mut stream, b"hello").expect("echo"), b"hello");
        assert_eq!(proxy.accepted_connections(), 1);
        assert_eq!(proxy.live_connections(), 1);
        drop(stream);
        wait("the connection to be forgotten", || proxy.live_connections() == 0);
    }

    #[test]
    fn cut_closes_live_connections_and_new_ones_until_restored() {
        let proxy = TcpProxy::start(echo_server()).expect("proxy");
        let mut live = connect(&proxy);
        assert_eq!(echo(&mut live, b"before").expect("echo"), b"before");
        proxy.cut();
        assert_eq!(proxy.live_connections(), 0);
        // The live connection is closed: reading ends (EOF or reset), never times out.
        let mut buffer = [0u8; 8];
        match live.read(&mut buffer) {
            Ok(n) => assert_eq!(n, 0, "no data after a cut"),
            Err(e) => assert!(!matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}"),
        }
        // A new connection is accepted and closed at once.
        let mut fresh = connect(&proxy);
        let result = echo(&mut fresh, b"during");
        assert!(result.is_err(), "no echo while cut: {result:?}");
        proxy.restore();
        let mut healed = connect(&proxy);
        assert_eq!(echo(&mut healed, b"after").expect("echo"), b"after");
    }

    #[test]
    fn blackhole_stalls_traffic_and_restore_delivers_it() {
        let proxy = TcpProxy::start(echo_server()).expect("proxy");
        let mut live = connect(&proxy);
        assert_eq!(echo(&mut live, b"one").expect("echo"), b"one");
        proxy.blackhole();
        live.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        live.write_all(b"two").expect("write");
        let mut buffer = [0u8; 3];
        let stalled = live.read(&mut buffer);
        assert!(
            matches!(&stalled, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
            "a blackholed connection neither answers nor closes: {stalled:?}"
        );
        // A new connection is accepted but nothing reaches the target.
        let mut fresh = connect(&proxy);
        fresh.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        fresh.write_all(b"new").expect("write");
        assert!(fresh.read(&mut buffer).is_err());
        proxy.restore();
        live.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        live.read_exact(&mut buffer).expect("held bytes delivered");
        assert_eq!(&buffer, b"two");
        fresh.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        fresh.read_exact(&mut buffer).expect("held connection proceeds");
        assert_eq!(&buffer, b"new");
    }

    /// A target that echoes and reports every byte it received.
    fn recording_echo_server() -> (SocketAddr, std::sync::mpsc::Receiver<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let sent = sent.clone();
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 64];
                    while let Ok(n @ 1..) = stream.read(&mut buffer) {
                        let _ = sent.send(buffer[..n].to_vec());
                        if stream.write_all(&buffer[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, received)
    }

    #[test]
    fn lose_answers_delivers_the_request_and_closes_instead_of_answering() {
        let (target, received) = recording_echo_server();
        let proxy = TcpProxy::start(target).expect("proxy");
        let mut live = connect(&proxy);
        assert_eq!(echo(&mut live, b"one").expect("echo"), b"one");
        assert_eq!(received.recv_timeout(Duration::from_secs(5)).expect("received"), b"one");
        proxy.lose_answers();
        assert_eq!(proxy.mode(), ProxyMode::LoseAnswers);
        live.write_all(b"two").expect("write");
        assert_eq!(received.recv_timeout(Duration::from_secs(5)).expect("the request arrives"), b"two");
        let mut buffer = [0u8; 3];
        match live.read(&mut buffer) {
            Ok(n) => assert_eq!(n, 0, "the answer is lost: {:?}", &buffer[..n]),
            Err(e) => assert!(!matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}"),
        }
        proxy.restore();
        let mut healed = connect(&proxy);
        assert_eq!(echo(&mut healed, b"three").expect("echo"), b"three");
    }

    #[test]
    fn cut_ends_a_blackholed_connection() {
        let proxy = TcpProxy::start(echo_server()).expect("proxy");
        let mut live = connect(&proxy);
        assert_eq!(echo(&mut live, b"x").expect("echo"), b"x");
        proxy.blackhole();
        live.write_all(b"y").expect("write");
        proxy.cut();
        let mut buffer = [0u8; 1];
        match live.read(&mut buffer) {
            Ok(n) => assert_eq!(n, 0),
            Err(e) => assert!(!matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}"),
        }
    }

    #[test]
    fn drop_stops_listening_and_closes_connections() {
        let proxy = TcpProxy::start(echo_server()).expect("proxy");
        let addr = proxy.addr();
        let mut live = connect(&proxy);
        assert_eq!(echo(&mut live, b"x").expect("echo"), b"x");
        drop(proxy);
        let mut buffer = [0u8; 1];
        match live.read(&mut buffer) {
            Ok(n) => assert_eq!(n, 0),
            Err(e) => assert!(!matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}"),
        }
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(), "nobody listens any more");
    }

    #[test]
    fn kubeconfig_with_server_rewrites_every_cluster() {
        let dir = tempfile::tempdir().expect("tempdir");
        let original = dir.path().join("in.kubeconfig");
        std::fs::write(
            &original,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://127.0.0.1:1\n\
             users:\n- name: u\n  user:\n    token: secret-token\ncontexts:\n- name: c\n  context:\n    cluster: a\n    \
             user: u\ncurrent-context: c\n",
        )
        .expect("write");
        let out = dir.path().join("out.kubeconfig");
        kubeconfig_with_server(&original, "https://127.0.0.1:2", &out).expect("rewrite");
        let rewritten = Kubeconfig::read_from(&out).expect("readable");
        let server = rewritten.clusters[0].cluster.as_ref().and_then(|c| c.server.clone());
        assert_eq!(server.as_deref(), Some("https://127.0.0.1:2"));
        assert_eq!(rewritten.current_context.as_deref(), Some("c"));
        let token = rewritten.auth_infos[0].auth_info.as_ref().and_then(|a| a.token.clone());
        assert!(token.is_some(), "the token is kept");
    }
}
