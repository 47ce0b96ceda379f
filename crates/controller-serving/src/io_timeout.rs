//! A connection wrapper that fails writes which make no progress for a while, so a client that
//! stops reading cannot hold a connection (and its task) forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Wraps a connection; a write, flush or shutdown that stays pending for `timeout` fails with
/// [`io::ErrorKind::TimedOut`]. Any progress restarts the clock. Reads are untouched.
///
/// This is a stall timeout, not Go's absolute `WriteTimeout` deadline: a client that keeps
/// reading slowly is not cut off, one that stops reading is.
pub(crate) struct WriteTimeout<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteTimeout<T> {
    pub(crate) fn new(inner: T, timeout: Duration) -> Self {
        Self { inner, timeout, stalled: None }
    }

    /// Called when the inner write is pending: start or poll the stall clock.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.timeout;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stalled = None;
                Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing for {}s", timeout.as_secs_f64()),
                ))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn guard<R>(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match result {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.poll_stall(cx).map(Err),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.guard(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.guard(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.guard(cx, result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.guard(cx, result)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_times_the_write_out() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut server = WriteTimeout::new(server, Duration::from_secs(20));
        // 64 bytes fit the pipe; the rest waits for a reader that never comes. With the clock
        // paused, tokio advances it to the stall deadline as soon as everything is idle.
        let started = tokio::time::Instant::now();
        let error = server.write_all(&[7u8; 1024]).await.err().map(|e| e.kind());
        assert_eq!(error, Some(io::ErrorKind::TimedOut));
        assert_eq!(started.elapsed(), Duration::from_secs(20));
        let mut first = [0u8; 64];
        assert_eq!(client.read_exact(&mut first).await.ok(), Some(64));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_but_reading_client_is_not_cut_off() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut server = WriteTimeout::new(server, Duration::from_secs(20));
        let reader = tokio::spawn(async move {
            let mut received = Vec::new();
            let mut chunk = [0u8; 64];
            loop {
                // Each chunk arrives 15 s after the last: slower than nothing, faster than the
                // stall timeout.
                tokio::time::sleep(Duration::from_secs(15)).await;
                match client.read(&mut chunk).await {
                    Ok(0) | Err(_) => break received,
                    Ok(n) => received.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                }
            }
        });
        let written = server.write_all(&[9u8; 256]).await;
        assert!(written.is_ok(), "{written:?}");
        drop(server);
        let received = reader.await.unwrap_or_default();
        assert_eq!(received.len(), 256);
    }
}
