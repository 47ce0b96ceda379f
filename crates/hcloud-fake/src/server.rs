//! [`FakeServer`]: a fake bound to a TCP listener and served by axum in a tokio task.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::FakeConfig;
use crate::data_plane::DataPlaneTask;
use crate::error::FakeError;
use crate::handle::FakeHandle;
use crate::http::conn::{ConnHandle, ResettableListener};

/// A running fake. Dropping it stops the listener (and the data plane); [`FakeServer::shutdown`]
/// also waits.
#[derive(Debug)]
pub struct FakeServer {
    handle: FakeHandle,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
    data_plane: Option<DataPlaneTask>,
}

impl FakeServer {
    /// Starts a fake on `127.0.0.1` with an ephemeral port.
    pub async fn start(config: FakeConfig) -> Result<Self, FakeError> {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config).await
    }

    /// Starts a fake on `addr`.
    pub async fn bind(addr: SocketAddr, config: FakeConfig) -> Result<Self, FakeError> {
        Self::serve(addr, FakeHandle::new(config)).await
    }

    /// Serves an existing handle (e.g. one seeded beforehand) on `addr`; starts its Load
    /// Balancer data plane when it was configured with one.
    pub async fn serve(addr: SocketAddr, handle: FakeHandle) -> Result<Self, FakeError> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let router = crate::http::router(handle.clone());
        let task = tokio::spawn(async move {
            // Connections carry a reset switch, for faults that reset them.
            let listener = ResettableListener(listener);
            axum::serve(listener, router.into_make_service_with_connect_info::<ConnHandle>())
                .with_graceful_shutdown(async move {
                    // Either an explicit stop or the sender being dropped ends serving.
                    let _ = stopped.await;
                })
                .await
        });
        let data_plane = crate::data_plane::spawn(&handle);
        Ok(Self { handle, addr, stop: Some(stop), task: Some(task), data_plane })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API endpoint, `http://127.0.0.1:PORT/v1` (use as `HCLOUD_ENDPOINT`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The Robot webservice endpoint, `http://127.0.0.1:PORT/robot` (use as `ROBOT_ENDPOINT`).
    pub fn robot_url(&self) -> String {
        format!("http://{}/robot", self.addr)
    }

    /// The control endpoint, `http://127.0.0.1:PORT/_fake`.
    pub fn control_url(&self) -> String {
        format!("http://{}/_fake", self.addr)
    }

    /// A handle to the fake's state and controls.
    pub fn handle(&self) -> FakeHandle {
        self.handle.clone()
    }

    /// Stops accepting connections and waits (at most 5 s) for open ones to finish; stops
    /// the data plane (every listener, forwarded connection and health checker) and waits
    /// for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task).await.is_err()
        {
            task.abort();
        }
        if let Some(data_plane) = self.data_plane.take() {
            data_plane.shutdown().await;
        }
    }

    /// Serves until `signal` completes, then shuts down.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) {
        signal.await;
        self.shutdown().await;
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
