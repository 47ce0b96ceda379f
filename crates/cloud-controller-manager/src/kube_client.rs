//! Kubernetes clients: connection config from `--kubeconfig`/`--master`/in-cluster, and a
//! client-side token bucket per client (`--kube-api-qps`, `--kube-api-burst`), like the
//! per-controller clients of upstream's cloud-controller-manager.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use sync_lock::Unpoison as _;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::dry_run::DryRunLayer;
use crate::metrics::RestClientMetricsLayer;

/// Builds the connection config: `--kubeconfig` if given, else `--master` alone, else the
/// pod's service account, else `$KUBECONFIG`/`~/.kube/config`. `--master` overrides the
/// server URL.
pub async fn connection_config(kubeconfig: Option<&Path>, master: Option<&str>) -> Result<Config, KubeClientError> {
    let master_url = |m: &str| m.parse().map_err(|_| KubeClientError::Master(m.to_owned()));
    let mut config = match (kubeconfig, master) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|source| KubeClientError::ReadKubeconfig { path: path.to_owned(), source })?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| KubeClientError::UseKubeconfig { path: path.to_owned(), source })?
        }
        (None, Some(master)) => Config::new(master_url(master)?),
        (None, None) => match Config::incluster() {
            Ok(c) => c,
            Err(in_cluster) => {
                Config::infer().await.map_err(|infer| KubeClientError::NoConnection { in_cluster, infer })?
            }
        },
    };
    if let Some(master) = master {
        config.cluster_url = master_url(master)?;
    }
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(config)
}

/// The connection config of a delegation kubeconfig named by `flag`
/// (`--authentication-kubeconfig`, `--authorization-kubeconfig`).
pub async fn delegation_config(flag: &'static str, path: &Path) -> Result<Config, KubeClientError> {
    let error = |source| KubeClientError::DelegationKubeconfig { flag, path: path.to_owned(), source };
    let kubeconfig = Kubeconfig::read_from(path).map_err(error)?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.map_err(error)?;
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(config)
}

/// A client whose requests are limited to `qps` per second with bursts of `burst`, sending
/// `user_agent` (upstream: `<program>/<version> (<os>/<arch>) <controller>`), each request
/// counted by `metrics`; in a dry run, its writes go out with `dryRun=All` and are recorded
/// (`dry_run`, [`crate::dry_run`]).
pub fn rate_limited_client(
    mut config: Config,
    qps: f64,
    burst: u32,
    user_agent: &str,
    metrics: &RestClientMetricsLayer,
    dry_run: Option<DryRunLayer>,
) -> Result<Client, KubeClientError> {
    if let Ok(value) = http::HeaderValue::from_str(user_agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let builder = ClientBuilder::try_from(config).map_err(KubeClientError::Build)?;
    Ok(builder
        .with_layer(&TokenBucketLayer::new(qps, burst))
        .with_layer(metrics)
        .with_layer(&tower::util::option_layer(dry_run))
        .build())
}

/// Why a Kubernetes client could not be set up. An underlying error is the
/// [`source`](std::error::Error::source), not part of the message.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    /// `--kubeconfig` could not be read.
    #[error("--kubeconfig: cannot read {path:?}")]
    ReadKubeconfig {
        /// The `--kubeconfig` file that could not be read.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// `--kubeconfig` was read but is not usable.
    #[error("--kubeconfig: {path:?} is not usable")]
    UseKubeconfig {
        /// The `--kubeconfig` file whose contents are not usable.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// `--master` is not a URL.
    #[error("--master: {0:?} is not a URL")]
    Master(String),
    /// Neither in a cluster nor a usable kubeconfig.
    #[error(
        "no Kubernetes connection: not in a cluster ({in_cluster}), and no usable $KUBECONFIG or ~/.kube/config \
         ({infer}); pass --kubeconfig"
    )]
    NoConnection {
        /// Why the in-cluster config failed.
        in_cluster: kube::config::InClusterError,
        /// Why the kubeconfig lookup failed.
        infer: kube::config::InferConfigError,
    },
    /// The client could not be built from the config.
    #[error("cannot build the Kubernetes client")]
    Build(#[source] kube::Error),
    /// A delegation kubeconfig (`--authentication-kubeconfig`, `--authorization-kubeconfig`)
    /// could not be read or used.
    #[error("{flag}: cannot use {path:?}")]
    DelegationKubeconfig {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
}

/// A token bucket: `burst` tokens, refilled at `qps` per second. A request takes a token,
/// waiting for it if the bucket is empty (reservations keep waiters in order, like
/// client-go's `flowcontrol` limiter).
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Reserves a token and returns how long to wait before using it.
    pub fn reserve(&self) -> Duration {
        // The critical section only does arithmetic; a poisoned lock still holds a valid pair.
        let mut s = self.state.lock_unpoisoned();
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(s.1).as_secs_f64();
        s.0 = (s.0 + elapsed * self.qps).min(self.burst);
        s.1 = now;
        s.0 -= 1.0;
        if s.0 >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-s.0 / self.qps) }
    }
}

/// Tower layer applying a [`TokenBucket`].
#[derive(Debug, Clone)]
pub struct TokenBucketLayer {
    bucket: Arc<TokenBucket>,
}

impl TokenBucketLayer {
    /// A layer with its own bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        TokenBucketLayer { bucket: Arc::new(TokenBucket::new(qps, burst)) }
    }
}

impl<S> Layer<S> for TokenBucketLayer {
    type Service = TokenBucketService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TokenBucketService { inner, bucket: self.bucket.clone() }
    }
}

/// Service produced by [`TokenBucketLayer`].
#[derive(Debug, Clone)]
pub struct TokenBucketService<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
}

impl<S, R> Service<R> for TokenBucketService<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let wait = self.bucket.reserve();
        // Tower futures do their work when polled, so waiting before the first poll delays
        // the request itself.
        let fut = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            fut.await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_qps() {
        let b = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        let w = b.reserve();
        assert!((w.as_secs_f64() - 0.1).abs() < 1e-6, "{w:?}");
        let w = b.reserve();
        assert!((w.as_secs_f64() - 0.2).abs() < 1e-6, "{w:?}");
        tokio::time::advance(Duration::from_secs(10)).await;
        // Refilled up to the burst, minus the two reservations still owed.
        for _ in 0..3 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert!(b.reserve() > Duration::ZERO);
    }
}
