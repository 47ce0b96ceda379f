//! `http` and `https` services: the Load Balancer speaks HTTP to the client and proxies every
//! request on its own to a healthy target, as Hetzner documents its HTTP services:
//!
//! - **No healthy target**: `503 Service Unavailable` (the official CCM's own e2e suite waits
//!   through 503s for a new Load Balancer's targets to turn healthy: `WaitForHTTPAvailable` in
//!   `tests/e2e/helper_test.go` of hcloud-cloud-controller-manager v1.35.0, "service still
//!   unavailable, keep waiting").
//! - **Client address**: `X-Forwarded-For` gets the client's address appended (Hetzner's Load
//!   Balancer FAQ, "Do Load Balancers forward special HTTP headers?", which Hetzner's
//!   maintainers point to for HTTP services in hetznercloud/hcloud-cloud-controller-manager#92
//!   and #171). `X-Forwarded-Proto` (`http`/`https`) is the fake's addition, not confirmed by a
//!   source we could read.
//! - **Sticky sessions** (`sticky_sessions`, `cookie_name` default `HCLBSTICKY`,
//!   `cookie_lifetime` default 300 s: the API reference's `load_balancer_service.http`): a
//!   request without a valid cookie is balanced as usual and its response sets the cookie
//!   (`Max-Age` = the lifetime, `Path=/`); a request with it goes to the same target while that
//!   target is healthy. The cookie's value naming the target is the fake's choice.
//! - **`redirect_http`** ("Redirect HTTP requests to HTTPS", API reference): port 80 answers
//!   every request with `301 Moved Permanently` to the same host and path on `https://` (the
//!   status code is the fake's choice).
//!
//! Also the fake's choices: a target that refuses the connection or breaks the exchange gives
//! `502 Bad Gateway`; hop-by-hop headers are not forwarded; connection upgrades (WebSocket)
//! are not supported; the PROXY header, with `proxyprotocol`, opens each connection to a target.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::plan::{ForwardMode, ForwardSpec};
use super::proxy_protocol;
use super::targets::{ListenerCtx, choose, connect};
use crate::state::HealthKey;

/// How long a client may take for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, hyper::Error>;

/// Headers that describe one connection, never forwarded (RFC 9110, section 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// One client connection of an `http`/`https` listener.
pub(super) struct Proxy {
    pub ctx: Arc<ListenerCtx>,
    pub spec: Arc<ForwardSpec>,
    pub cursor: Arc<AtomicUsize>,
    pub peer: SocketAddr,
}

impl Proxy {
    /// Serves the connection (after the TLS handshake when `tls` is given) until the client
    /// closes it.
    pub(super) async fn serve(self, client: TcpStream, tls: Option<TlsAcceptor>) {
        let local = client.local_addr().ok();
        let this = Arc::new(self);
        let service = {
            let this = Arc::clone(&this);
            service_fn(move |req| {
                let this = Arc::clone(&this);
                async move { Ok::<_, Infallible>(this.handle(req, local).await) }
            })
        };
        let builder = hyper::server::conn::http1::Builder::new();
        let served = match tls {
            None => builder.serve_connection(TokioIo::new(client), service).await,
            Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(client)).await {
                Ok(Ok(stream)) => builder.serve_connection(TokioIo::new(stream), service).await,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %this.peer, "data plane: TLS handshake failed: {e}");
                    return;
                }
                Err(_) => return,
            },
        };
        if let Err(e) = served {
            tracing::debug!(peer = %this.peer, "data plane: HTTP connection ended: {e}");
        }
    }

    /// One request: a target (sticky or balanced), the request forwarded, its answer back.
    async fn handle(&self, req: Request<Incoming>, local: Option<SocketAddr>) -> Response<Body> {
        let ForwardMode::Http(http) = &self.spec.mode else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "not an HTTP listener\n");
        };
        let sticky = http.sticky.as_ref();
        let preferred = sticky.and_then(|(name, _)| cookie(req.headers(), name)).and_then(|v| target_of_cookie(&v));
        let Some(chosen) = choose(&self.ctx, &self.spec, &self.cursor, preferred.as_ref()) else {
            self.ctx.counters.rejected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return plain(StatusCode::SERVICE_UNAVAILABLE, "503 Service Unavailable: no healthy target\n");
        };
        let source = local.map(|l| l.ip()).filter(|ip| !ip.is_loopback());
        let scheme = if http.tls.is_some() { "https" } else { "http" };
        let forwarded = forward_request(req, self.peer.ip(), scheme);
        let header = self
            .spec
            .proxyprotocol
            .then_some(local)
            .flatten()
            .map(|local| proxy_protocol::encode(self.ctx.proxy_protocol, self.peer, local));
        let mut response = match exchange(chosen.backend, source, header, forwarded).await {
            Ok(response) => response,
            Err(e) => {
                tracing::debug!(backend = %chosen.backend, "data plane: proxying a request failed: {e}");
                return plain(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n");
            }
        };
        if let Some((name, lifetime)) = sticky
            && preferred.as_ref() != Some(&chosen.target)
        {
            let value = format!("{name}={}; Max-Age={lifetime}; Path=/", cookie_of_target(&chosen.target));
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
        }
        drop(chosen.guard);
        response
    }
}

/// The request as the target gets it: origin-form, hop-by-hop headers dropped,
/// `X-Forwarded-For` with the client appended, `X-Forwarded-Proto`.
fn forward_request(req: Request<Incoming>, client: IpAddr, scheme: &'static str) -> Request<Incoming> {
    let (mut parts, body) = req.into_parts();
    if let Some(path) = parts.uri.path_and_query().cloned() {
        let mut uri = http::uri::Parts::default();
        uri.path_and_query = Some(path);
        if let Ok(uri) = http::Uri::from_parts(uri) {
            parts.uri = uri;
        }
    }
    parts.version = http::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    let forwarded_for = match parts.headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(earlier) if !earlier.trim().is_empty() => format!("{earlier}, {client}"),
        _ => client.to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&forwarded_for) {
        parts.headers.insert(HeaderName::from_static("x-forwarded-for"), value);
    }
    parts.headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static(scheme));
    Request::from_parts(parts, body)
}

/// Drops the hop-by-hop headers and those the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|n| n.trim().to_ascii_lowercase()))
        .filter(|n| !n.is_empty())
        .collect();
    for name in HOP_BY_HOP.iter().copied().chain(named.iter().map(String::as_str)) {
        headers.remove(name);
    }
}

/// Sends one request to `backend` over a connection of its own and returns the answer.
async fn exchange(
    backend: SocketAddr,
    source: Option<IpAddr>,
    header: Option<Vec<u8>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, String> {
    let mut upstream = connect(backend, source).await.map_err(|e| format!("connecting: {e}"))?;
    if let Some(header) = header {
        upstream.write_all(&header).await.map_err(|e| format!("writing the PROXY header: {e}"))?;
    }
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await.map_err(|e| e.to_string())?;
    // Ends when the exchange is over and the sender is gone.
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(%backend, "data plane: connection to the target ended: {e}");
        }
    });
    let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, body.boxed()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim().to_owned())
}

/// The sticky cookie's value for a target: `s<server id>` or `i<IP>`.
fn cookie_of_target(target: &HealthKey) -> String {
    match target {
        HealthKey::Server(id) => format!("s{id}"),
        HealthKey::Ip(ip) => format!("i{ip}"),
    }
}

/// The target a sticky cookie's value names (`None` for anything else).
fn target_of_cookie(value: &str) -> Option<HealthKey> {
    if let Some(id) = value.strip_prefix('s') {
        return id.parse().ok().map(HealthKey::Server);
    }
    value.strip_prefix('i').filter(|ip| ip.parse::<IpAddr>().is_ok()).map(|ip| HealthKey::Ip(ip.to_owned()))
}

/// A short text answer of the Load Balancer itself.
fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).map_err(|e| match e {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// The port 80 of an `https` service with `redirect_http`: `301` to `https://<host>[:port]<path>`.
pub(super) async fn redirect(client: TcpStream, https_port: u16) {
    let local = client.local_addr().ok();
    let service = service_fn(move |req: Request<Incoming>| async move {
        Ok::<_, Infallible>(redirect_response(&req, https_port, local))
    });
    if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(client), service).await {
        tracing::debug!("data plane: redirect connection ended: {e}");
    }
}

fn redirect_response(req: &Request<Incoming>, https_port: u16, local: Option<SocketAddr>) -> Response<Body> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.parse::<http::uri::Authority>().map(|a| a.host().to_owned()).unwrap_or_else(|_| h.to_owned()))
        .or_else(|| local.map(|l| l.ip().to_string()))
        .unwrap_or_default();
    let port = if https_port == 443 { String::new() } else { format!(":{https_port}") };
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let location = format!("https://{host}{port}{path}");
    let mut response = plain(StatusCode::MOVED_PERMANENTLY, "301 Moved Permanently\n");
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_cookies_name_their_target_and_nothing_else() {
        for target in [HealthKey::Server(42), HealthKey::Ip("10.0.0.7".to_owned())] {
            assert_eq!(target_of_cookie(&cookie_of_target(&target)), Some(target));
        }
        assert_eq!(target_of_cookie("sabc"), None);
        assert_eq!(target_of_cookie("i999.1.1.1"), None);
        assert_eq!(target_of_cookie(""), None);
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; HCLBSTICKY=s7"));
        headers.append(header::COOKIE, HeaderValue::from_static("other=x"));
        assert_eq!(cookie(&headers, "HCLBSTICKY").as_deref(), Some("s7"));
        assert_eq!(cookie(&headers, "missing"), None);
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, X-Secret"));
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, vec!["x-kept"]);
    }
}
