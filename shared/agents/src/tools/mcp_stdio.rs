//! A stdio MCP server's process and its transport: rmcp's line transport over the
//! child's stdout and stdin, each incoming message read up to the server's limit of a
//! tool reply (`--max-tool-reply-bytes`) rather than rmcp's fixed 16 MiB, so a server
//! writing a huge line or one without end never grows the runner's memory past it.
//! rmcp drops a longer line (the call waiting for it would only time out);
//! [`LineWatch`] counts each one, so that the call fails naming the limit.

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// A running stdio server: the transport to it, and the child, killed when the
/// connection is dropped.
pub(super) struct StdioServer {
    transport: AsyncRwTransport<RoleClient, LineWatch<ChildStdout>, ChildStdin>,
    _child: Child,
}

impl StdioServer {
    /// Starts `command` with piped stdio; its messages may be `limit` bytes long, and each
    /// longer one is counted in `oversized`. Also its stderr, to follow.
    pub(super) fn spawn(
        mut command: Command,
        limit: usize,
        oversized: Arc<AtomicU64>,
    ) -> io::Result<(StdioServer, Option<ChildStderr>)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let piped = |name| io::Error::other(format!("the child's {name} is not piped"));
        let stdout = child.stdout.take().ok_or_else(|| piped("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| piped("stdin"))?;
        let stderr = child.stderr.take();
        let watched = LineWatch {
            inner: stdout,
            limit,
            line: 0,
            counted: false,
            oversized,
        };
        let transport = AsyncRwTransport::new_client(watched, stdin).with_max_line_length(limit);
        Ok((
            StdioServer {
                transport,
                _child: child,
            },
            stderr,
        ))
    }
}

impl Transport<RoleClient> for StdioServer {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.transport.close()
    }
}

/// Passes a stream on unchanged, counting each line longer than `limit` bytes once.
pub(super) struct LineWatch<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far.
    line: usize,
    /// Whether the current line was counted already.
    counted: bool,
    oversized: Arc<AtomicU64>,
}

impl<R> LineWatch<R> {
    fn watch(&mut self, mut bytes: &[u8]) {
        loop {
            match bytes.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    self.extend(end);
                    (self.line, self.counted) = (0, false);
                    bytes = &bytes[end + 1..];
                }
                None => return self.extend(bytes.len()),
            }
        }
    }

    fn extend(&mut self, bytes: usize) {
        self.line = self.line.saturating_add(bytes);
        if self.line > self.limit && !self.counted {
            self.counted = true;
            self.oversized.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineWatch<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.watch(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(limit: usize, chunks: &[&[u8]]) -> u64 {
        let oversized = Arc::new(AtomicU64::new(0));
        let mut watch = LineWatch {
            inner: tokio::io::empty(),
            limit,
            line: 0,
            counted: false,
            oversized: oversized.clone(),
        };
        for chunk in chunks {
            watch.watch(chunk);
        }
        oversized.load(Ordering::Relaxed)
    }

    #[test]
    fn each_line_over_the_limit_is_counted_once_across_reads() {
        assert_eq!(watch(4, &[b"abcd\n", b"ab", b"cd\n"]), 0, "lines of the limit pass");
        assert_eq!(
            watch(4, &[b"abc", b"de", b"fghij", b"k\nok\n"]),
            1,
            "one long line, read in pieces"
        );
        assert_eq!(watch(4, &[b"abcdef\nabcdefg\nab\n"]), 2, "two long lines in one read");
        assert_eq!(watch(4, &[b"abcdefgh"]), 1, "a line without end");
    }
}
