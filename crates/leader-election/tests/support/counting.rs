//! A tower layer that records every Kubernetes API request a client sends: method, path,
//! response status and send time. Used to assert request patterns and to measure request
//! rates (the traffic itself is TLS, so a proxy cannot count requests).

// Shared by the tests and the `request_rate` example, which each use a different subset.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use sync_lock::Unpoison as _;

use tokio::time::Instant;

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Request {
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Response status; `None` while pending or when no response came (timeout, transport error).
    pub status: Option<u16>,
    /// Send time.
    pub at: Instant,
}

/// The shared log; also the [`tower::Layer`].
#[derive(Debug, Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<Request>>>);

impl RequestLog {
    /// A copy of all requests so far.
    pub fn requests(&self) -> Vec<Request> {
        self.0.lock_unpoisoned().clone()
    }

    /// The requests sent at or after `since`.
    pub fn since(&self, since: Instant) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.at >= since).collect()
    }

    /// `(method, status)` of the requests sent at or after `since`, for compact assertions.
    pub fn summary_since(&self, since: Instant) -> Vec<(String, Option<u16>)> {
        self.since(since).into_iter().map(|r| (r.method, r.status)).collect()
    }

    fn push(&self, request: Request) -> usize {
        let mut log = self.0.lock_unpoisoned();
        log.push(request);
        log.len() - 1
    }

    fn set_status(&self, index: usize, status: Option<u16>) {
        if let Some(request) = self.0.lock_unpoisoned().get_mut(index) {
            request.status = status;
        }
    }
}

impl<S> tower::Layer<S> for RequestLog {
    type Service = Logged<S>;

    fn layer(&self, inner: S) -> Logged<S> {
        Logged { inner, log: self.clone() }
    }
}

/// The service of [`RequestLog`].
#[derive(Debug, Clone)]
pub struct Logged<S> {
    inner: S,
    log: RequestLog,
}

impl<S, RequestBody, ResponseBody> tower::Service<http::Request<RequestBody>> for Logged<S>
where
    S: tower::Service<http::Request<RequestBody>, Response = http::Response<ResponseBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResponseBody: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<RequestBody>) -> Self::Future {
        let index = self.log.push(Request {
            method: request.method().to_string(),
            path: request.uri().path().to_owned(),
            status: None,
            at: Instant::now(),
        });
        let response = self.inner.call(request);
        let log = self.log.clone();
        Box::pin(async move {
            let response = response.await;
            log.set_status(index, response.as_ref().ok().map(|r| r.status().as_u16()));
            response
        })
    }
}

/// A client from `kubeconfig` (optionally with its server URL replaced, e.g. by a proxy's)
/// whose requests are recorded in `log`.
pub async fn counted_client(
    kubeconfig: &std::path::Path,
    server_url: Option<&str>,
    log: &RequestLog,
) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let mut config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default()).await?;
    if let Some(url) = server_url {
        config.cluster_url = url.parse()?;
    }
    Ok(kube::client::ClientBuilder::try_from(config)?.with_layer(log).build())
}
