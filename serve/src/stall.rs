//! [`Stalling`]: a connection whose writes may stall at most
//! [`Limits::send_timeout`](crate::Limits::send_timeout) — a client that stops reading its answer
//! gets its connection closed rather than holding the answer's buffers and a connection slot
//! forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `io` whose writes fail with [`io::ErrorKind::TimedOut`] once one has made no progress for
/// `timeout`.
pub(crate) struct Stalling<T> {
    io: T,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> Stalling<T> {
    /// `io` with writes bounded by `timeout`.
    pub(crate) fn new(io: T, timeout: Duration) -> Self {
        Self { io, timeout, stalled: None }
    }

    /// Passes a write's outcome on; a pending one arms the stall timer, and fails once it fired.
    fn bounded<R>(&mut self, cx: &mut Context<'_>, outcome: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if outcome.is_ready() {
            self.stalled = None;
            return outcome;
        }
        let timeout = self.timeout;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let text = format!("the client read nothing for {timeout:?}");
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, text)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stalling<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stalling<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write(cx, buf);
        this.bounded(cx, outcome)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.bounded(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_flush(cx);
        this.bounded(cx, outcome)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_shutdown(cx);
        this.bounded(cx, outcome)
    }
}
