//! The listeners: binding, the accept loop, the connection cap, TLS, one hyper connection per
//! client with timeouts on every phase (see [`crate::limits`]), request handling
//! (authentication for the secure listener, then the routes) and graceful shutdown.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{HeaderValue, WWW_AUTHENTICATE};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::acceptor::Acceptor;
use crate::admission::Admission;
use crate::auth::{Decision, DelegatingAuth, verb_for};
use crate::error::ServeError;
use crate::health::Health;
use crate::io_timeout::WriteTimeout;
use crate::limits::{Activity, Limits, Timeouts};
use crate::metrics::MetricsRegistry;
use crate::routes::{self, Body};
use crate::secure_serving::{HTTP2_MAX_STREAMS, SecureServing};

/// How long open connections may finish their requests after shutdown before they are cut.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// What bind errors of the secure listener name as their source.
const SECURE_SETTING: &str = "--bind-address/--secure-port";
/// What bind errors of the plain listener name (the caller adds where the address came from).
const PLAIN_SETTING: &str = "plain HTTP listener";
/// Pause after a failed `accept` (for example when out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A running listener.
#[derive(Debug)]
pub struct Bound {
    /// The address actually bound (with the real port when port 0 was asked for).
    pub local_addr: SocketAddr,
    /// The certificate chain the secure listener presents, leaf first; for a generated
    /// certificate the last element is its CA. Empty for the plain listener.
    pub certificate_chain: Vec<CertificateDer<'static>>,
    /// The server task: it ends after shutdown, once open connections finished (at most
    /// [`SHUTDOWN_GRACE`] later).
    pub task: JoinHandle<()>,
}

/// Start the secure listener with [`Limits::SECURE`]: HTTPS with the always-allowed paths
/// (by default exactly `/healthz`, `/livez`, `/readyz`) open to everyone and every other path
/// (`/metrics`, the single-check paths `/<probe>/<check>`) behind `authorizer`.
///
/// Returns `Ok(None)` when `config.port` is 0. The socket is bound and the certificate loaded
/// (or generated) before this returns, so an address in use or an unreadable, mismatched or
/// half-given certificate/key is a start-up error naming the flag. With `authorizer` `None`
/// every path is open to anyone who can reach the port (a warning says so). The server stops
/// when `shutdown` is cancelled.
pub async fn serve_secure(
    config: &SecureServing,
    health: Health,
    metrics: MetricsRegistry,
    authorizer: Option<DelegatingAuth>,
    shutdown: CancellationToken,
) -> Result<Option<Bound>, ServeError> {
    serve_secure_with(config, health, metrics, authorizer, shutdown, Limits::SECURE).await
}

/// [`serve_secure`] with other limits.
pub async fn serve_secure_with(
    config: &SecureServing,
    health: Health,
    metrics: MetricsRegistry,
    authorizer: Option<DelegatingAuth>,
    shutdown: CancellationToken,
    limits: Limits,
) -> Result<Option<Bound>, ServeError> {
    if config.port == 0 {
        tracing::info!("secure serving is off (--secure-port=0)");
        return Ok(None);
    }
    let (acceptor, certificate_chain) = Acceptor::new(config, authorizer.clone())?;
    let addr = SocketAddr::new(config.bind_address, config.port);
    let listener = bind(addr, SECURE_SETTING, config.reuse_port).await?;
    let local_addr = local_addr(&listener, addr, SECURE_SETTING)?;
    if authorizer.is_none() {
        tracing::warn!(%local_addr, "secure serving without delegated authentication: /metrics is open to every client");
    }
    let certificate = if config.cert_file.is_some() { "from --tls-cert-file" } else { "self-signed, in memory" };
    tracing::info!(%local_addr, certificate, "serving HTTPS");
    let mut server = Server::new("secure", health, metrics, authorizer, Some(acceptor), limits);
    if config.http2_max_streams > 0 {
        server.http2_max_streams = config.http2_max_streams;
    }
    let task = tokio::spawn(run(listener, Arc::new(server), shutdown));
    Ok(Some(Bound { local_addr, certificate_chain, task }))
}

/// Start the plain HTTP listener (`/metrics` and the health paths, no authentication) with
/// [`Limits::PLAIN`]. `addr` usually comes from [`crate::parse_listen_address`]; `[::]`
/// falls back to `0.0.0.0` where IPv6 is unavailable. Bind errors are returned before this
/// returns; the caller should add the name of the setting the address came from.
pub async fn serve_plain(
    addr: SocketAddr,
    health: Health,
    metrics: MetricsRegistry,
    shutdown: CancellationToken,
) -> Result<Bound, ServeError> {
    serve_plain_with(addr, health, metrics, shutdown, Limits::PLAIN).await
}

/// [`serve_plain`] with other limits.
pub async fn serve_plain_with(
    addr: SocketAddr,
    health: Health,
    metrics: MetricsRegistry,
    shutdown: CancellationToken,
    limits: Limits,
) -> Result<Bound, ServeError> {
    let listener = bind(addr, PLAIN_SETTING, false).await?;
    let local_addr = local_addr(&listener, addr, PLAIN_SETTING)?;
    tracing::info!(%local_addr, "serving plain HTTP");
    let server = Server::new("plain", health, metrics, None, None, limits);
    let task = tokio::spawn(run(listener, Arc::new(server), shutdown));
    Ok(Bound { local_addr, certificate_chain: Vec::new(), task })
}

/// Binds `addr` like Go's listeners: SO_REUSEADDR always (Go sets it on every Unix listener,
/// so `--permit-address-sharing` changes nothing there), SO_REUSEPORT with `reuse_port`.
fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    const BACKLOG: u32 = 1024;
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

async fn bind(addr: SocketAddr, setting: &str, reuse_port: bool) -> Result<TcpListener, ServeError> {
    match listen(addr, reuse_port) {
        Ok(listener) => Ok(listener),
        // `[::]` on a host without IPv6: all IPv4 interfaces instead (as Go does for ":port").
        Err(error) if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) && ipv6_unavailable(&error) => {
            let fallback = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port());
            tracing::debug!(%addr, %fallback, "IPv6 is unavailable ({error}); listening on IPv4 only");
            listen(fallback, reuse_port).map_err(|source| ServeError::Bind {
                addr: fallback,
                setting: setting.to_owned(),
                source,
            })
        }
        Err(source) => Err(ServeError::Bind { addr, setting: setting.to_owned(), source }),
    }
}

fn ipv6_unavailable(error: &io::Error) -> bool {
    const EAFNOSUPPORT: i32 = 97;
    error.kind() == io::ErrorKind::AddrNotAvailable || error.raw_os_error() == Some(EAFNOSUPPORT)
}

fn local_addr(listener: &TcpListener, addr: SocketAddr, setting: &str) -> Result<SocketAddr, ServeError> {
    listener.local_addr().map_err(|source| ServeError::Bind { addr, setting: setting.to_owned(), source })
}

/// Everything a connection needs.
struct Server {
    /// `secure` or `plain`, for logs.
    name: &'static str,
    health: Health,
    metrics: MetricsRegistry,
    authorizer: Option<DelegatingAuth>,
    tls: Option<Acceptor>,
    timeouts: Timeouts,
    admission: Admission,
    http2_max_streams: u32,
}

impl Server {
    fn new(
        name: &'static str,
        health: Health,
        metrics: MetricsRegistry,
        authorizer: Option<DelegatingAuth>,
        tls: Option<Acceptor>,
        limits: Limits,
    ) -> Self {
        let admission = Admission::new(&limits);
        Server {
            name,
            health,
            metrics,
            authorizer,
            tls,
            timeouts: limits.timeouts,
            admission,
            http2_max_streams: HTTP2_MAX_STREAMS,
        }
    }
}

/// Accept connections until `shutdown`, then give open ones [`SHUTDOWN_GRACE`] to finish.
async fn run(listener: TcpListener, server: Arc<Server>, shutdown: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            Some(finished) = connections.join_next(), if !connections.is_empty() => {
                if let Err(error) = finished {
                    tracing::warn!(listener = server.name, "a connection task failed: {error}");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(Arc::clone(&server), stream, peer, shutdown.clone()));
                }
                Err(error) => {
                    tracing::warn!(listener = server.name, "accepting a connection failed: {error}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    let drained =
        tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::debug!(listener = server.name, open = connections.len(), "closing connections after the grace period");
        connections.shutdown().await;
    }
    tracing::debug!(listener = server.name, "stopped");
}

async fn connection(server: Arc<Server>, stream: TcpStream, peer: SocketAddr, shutdown: CancellationToken) {
    let admitted = tokio::select! {
        admitted = server.admission.admit(peer.ip()) => admitted,
        // A client that gives up while waiting leaves the waiting room at once.
        () = gone(&stream) => return,
        () = shutdown.cancelled() => return,
    };
    // Held until the connection ends; a refused connection is closed by dropping `stream`.
    let _slot = match admitted {
        Ok(slot) => slot,
        Err(refused) => {
            let total = server.admission.refused();
            // The first refusal and then every doubling: visible, but not a flood under attack.
            if total.is_power_of_two() {
                tracing::warn!(listener = server.name, %peer, refused = total, "too many connections ({refused:?}); closing new ones");
            }
            return;
        }
    };
    // Best effort: small responses should not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = server.tls.as_ref().map(Acceptor::get) else {
        let io = WriteTimeout::new(stream, server.timeouts.write);
        return serve_http(server, io, Protocol::Http1, peer, None, shutdown).await;
    };
    let handshake = tokio::time::timeout(server.timeouts.tls_handshake, acceptor.accept(stream));
    let stream = tokio::select! {
        result = handshake => result,
        () = shutdown.cancelled() => return,
    };
    match stream {
        Ok(Ok(stream)) => {
            // Like Go's net/http: h2 only when ALPN chose it, otherwise HTTP/1.1; nothing is
            // sniffed from the client's first bytes.
            let protocol =
                if stream.get_ref().1.alpn_protocol() == Some(b"h2") { Protocol::Http2 } else { Protocol::Http1 };
            let certificates = stream.get_ref().1.peer_certificates().map(|c| Arc::new(c.to_vec()));
            let io = WriteTimeout::new(stream, server.timeouts.write);
            serve_http(server, io, protocol, peer, certificates, shutdown).await;
        }
        Ok(Err(error)) => tracing::debug!(listener = server.name, %peer, "TLS handshake failed: {error}"),
        Err(_) => tracing::debug!(listener = server.name, %peer, "TLS handshake timed out"),
    }
}

/// The HTTP version of a connection, fixed before the first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// Completes when the client closed its side before sending anything (or the connection
/// broke); never once it sent data, which stays unread for the handshake.
async fn gone(stream: &TcpStream) {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(0) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// The client certificate chain of a TLS connection, leaf first.
type PeerCertificates = Option<Arc<Vec<CertificateDer<'static>>>>;

async fn serve_http<IO>(
    server: Arc<Server>,
    io: IO,
    protocol: Protocol,
    peer: SocketAddr,
    certificates: PeerCertificates,
    shutdown: CancellationToken,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let timeouts = server.timeouts;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(timeouts.read);
    // Pings find a peer that vanished while a request is in flight; idle connections are
    // closed by `idle_for` below (hyper has no HTTP/2 idle timeout).
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(timeouts.read)
        .keep_alive_timeout(timeouts.read)
        .max_concurrent_streams(server.http2_max_streams);
    let builder = match protocol {
        Protocol::Http1 => builder.http1_only(),
        Protocol::Http2 => builder.http2_only(),
    };
    let name = server.name;
    let activity = Activity::new();
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request| {
        let busy = requests.begin();
        let answer = handle(Arc::clone(&server), peer, certificates.clone(), request);
        async move {
            let response = answer.await;
            drop(busy);
            response
        }
    });
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        served = activity.idle_for(timeouts.read, timeouts.idle) => {
            tracing::debug!(listener = name, %peer, served, "closing an idle connection");
            if !served {
                // Not one request in time (for h2 maybe not even its preface): just close.
                return;
            }
            // HTTP/2 says goodbye (GOAWAY); a client that does not even read that is cut off.
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(timeouts.write, connection).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(listener = name, %peer, "connection ended with an error: {error}");
    }
}

async fn handle(
    server: Arc<Server>,
    peer: SocketAddr,
    certificates: PeerCertificates,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let mut user = None;
    let response = match tokio::time::timeout(
        server.timeouts.handler,
        respond(&server, request, certificates.as_deref(), &mut user),
    )
    .await
    {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(listener = server.name, %method, %path, "no response within {:?}", server.timeouts.handler);
            routes::text(StatusCode::SERVICE_UNAVAILABLE, "timeout: the request took too long\n".to_owned())
        }
    };
    tracing::debug!(
        listener = server.name,
        %peer,
        %method,
        %path,
        status = response.status().as_u16(),
        user = user.as_deref().unwrap_or("-"),
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    Ok(response)
}

/// Authenticate and authorize (secure listener, protected paths), then answer from the routes.
async fn respond(
    server: &Server,
    request: Request<Incoming>,
    certificates: Option<&Vec<CertificateDer<'static>>>,
    user: &mut Option<String>,
) -> Response<Body> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(str::to_owned);
    if let Some(authorizer) = &server.authorizer
        && !authorizer.is_always_allowed(&path)
    {
        let certificates = certificates.map(Vec::as_slice);
        let decision = authorizer.authorize_request(request.headers(), certificates, &verb_for(&method), &path).await;
        *user = decision.user().map(str::to_owned);
        if !matches!(decision, Decision::Allowed { .. }) {
            let mut response = routes::text(decision.status(), decision.body());
            if decision.status() == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            return response;
        }
    }
    drop(request);
    let route = routes::route(&path);
    let (health, metrics) = (server.health.clone(), server.metrics.clone());
    // Health checks and metric encoders are synchronous code of other components; run them off
    // the async workers so that a slow one cannot stall the runtime and the handler timeout can
    // still answer.
    let answered =
        tokio::task::spawn_blocking(move || routes::respond(&method, &route, query.as_deref(), &health, &metrics))
            .await;
    answered.unwrap_or_else(|error| {
        tracing::warn!(%path, "answering the request failed: {error}");
        routes::text(StatusCode::INTERNAL_SERVER_ERROR, "internal server error\n".to_owned())
    })
}
