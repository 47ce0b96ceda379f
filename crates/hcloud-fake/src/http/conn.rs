//! Connections that a fault can reset: a TCP listener whose streams carry a [`ResetSwitch`],
//! handed to each request as [`ConnectInfo<ConnHandle>`](axum::extract::ConnectInfo).
//!
//! Pulling the switch makes the stream's next write fail and closes the socket with
//! `SO_LINGER 0`, so the peer sees a TCP RST (`connection reset by peer`) rather than an
//! orderly close.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Resets one connection when pulled.
#[derive(Debug, Default)]
pub(crate) struct ResetSwitch {
    pulled: AtomicBool,
}

impl ResetSwitch {
    /// From now on the connection fails every write and closes with a reset.
    pub(crate) fn pull(&self) {
        self.pulled.store(true, Ordering::SeqCst);
    }

    fn is_pulled(&self) -> bool {
        self.pulled.load(Ordering::SeqCst)
    }
}

/// The connection a request arrived on (request extension via `ConnectInfo`).
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle(pub Arc<ResetSwitch>);

/// A TCP listener whose connections can be reset by faults.
#[derive(Debug)]
pub(crate) struct ResettableListener(pub TcpListener);

/// A TCP stream with a [`ResetSwitch`].
#[derive(Debug)]
pub(crate) struct ResettableStream {
    inner: TcpStream,
    switch: Arc<ResetSwitch>,
}

impl ResettableStream {
    fn reset_error(&self) -> io::Error {
        // Set now, so the close that follows this error is an abortive one (RST).
        let _ = self.inner.set_zero_linger();
        io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by an injected fault")
    }
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.switch.is_pulled() {
            // Runs before `inner` is dropped: the close becomes a reset.
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.switch.is_pulled() {
            return Poll::Ready(Err(self.reset_error()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.switch.is_pulled() {
            return Poll::Ready(Err(self.reset_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.switch.is_pulled() {
            return Poll::Ready(Err(self.reset_error()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Listener for ResettableListener {
    type Io = ResettableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = Listener::accept(&mut self.0).await;
        (ResettableStream { inner: stream, switch: Arc::new(ResetSwitch::default()) }, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, ResettableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, ResettableListener>) -> Self {
        Self(stream.io().switch.clone())
    }
}
