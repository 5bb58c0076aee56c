//! A deadline for a new connection's handshake. hyper waits for a client's HTTP/2
//! preface forever and pings only connections that finished it, so a client that
//! connects and sends nothing would hold a file descriptor for as long as it likes.
//! Each accepted connection is wrapped: until the 24-byte preface has been read, a
//! read after the deadline fails, and hyper drops the connection. Over TLS the server
//! runs the TLS handshake under the same deadline (server.rs) and wraps the decrypted
//! stream, so the deadline, counted from the TCP accept, covers the TLS handshake and
//! the preface after it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

/// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`: what every HTTP/2 client sends first.
const PREFACE_BYTES: usize = 24;

/// An accepted connection that fails its reads once `timeout` has passed without
/// the first [`PREFACE_BYTES`] bytes having arrived.
pub(crate) struct HandshakeDeadline<IO> {
    io: IO,
    /// None once the preface is in: from then on HTTP/2 keepalive pings watch the peer.
    deadline: Option<Pin<Box<Sleep>>>,
    received: usize,
}

impl<IO> HandshakeDeadline<IO> {
    pub(crate) fn new(io: IO, timeout: Duration) -> Self {
        Self::until(io, Instant::now() + timeout)
    }

    /// With a deadline already running (from the TCP accept, before a TLS handshake).
    pub(crate) fn until(io: IO, deadline: Instant) -> Self {
        HandshakeDeadline {
            io,
            deadline: Some(Box::pin(tokio::time::sleep_until(deadline))),
            received: 0,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for HandshakeDeadline<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Polled first so its timer wakes this task while the read is pending.
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            tracing::debug!("closing a connection that did not finish its handshake in time");
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not finish its handshake within --handshake-timeout-ms",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.deadline.is_some() && matches!(polled, Poll::Ready(Ok(()))) {
            this.received += buf.filled().len() - before;
            if this.received >= PREFACE_BYTES {
                this.deadline = None;
            }
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for HandshakeDeadline<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The TCP connection's own info, so handlers and quotas see the client's address as before.
impl Connected for HandshakeDeadline<TcpStream> {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

/// The TLS connection's info (address and client certificates), as tonic's own TLS gives it.
impl Connected for HandshakeDeadline<TlsStream<TcpStream>> {
    type ConnectInfo = TlsConnectInfo<TcpConnectInfo>;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn reads_fail_after_the_deadline_until_the_preface_is_in() {
        let (client, server) = tokio::io::duplex(64);
        let mut silent = HandshakeDeadline::new(server, Duration::from_secs(5));
        let mut buf = [0u8; 8];
        let err = silent.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        drop(client);

        let (mut client, server) = tokio::io::duplex(64);
        let mut prompt = HandshakeDeadline::new(server, Duration::from_secs(5));
        client.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
        let mut preface = [0u8; PREFACE_BYTES];
        prompt.read_exact(&mut preface).await.unwrap();
        // Past the deadline, a connection that sent its preface reads on.
        tokio::time::advance(Duration::from_secs(10)).await;
        client.write_all(b"more").await.unwrap();
        assert_eq!(prompt.read(&mut buf).await.unwrap(), 4);
    }
}
