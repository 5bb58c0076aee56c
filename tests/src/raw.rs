//! gRPC calls made by hand over a tonic channel, for what no generated client sends: a
//! `grpc-encoding` of any name, messages compressed (or flagged so) by the test itself,
//! a decompression bomb. The answer comes back as it was on the wire: its headers, each
//! message with its compressed flag, the status.

use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::codegen::http::{HeaderMap, Request};
use tonic::codegen::{Bytes, Service};
use tonic::transport::Channel;

/// A raw call's answer.
#[derive(Debug)]
pub struct RawReply {
    pub headers: HeaderMap,
    /// Each message: its compressed flag and its bytes as sent.
    pub messages: Vec<(u8, Vec<u8>)>,
    /// From the trailers, or from the headers of a trailers-only answer.
    pub status: tonic::Status,
}

impl RawReply {
    /// The value of a response header ("" without it).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }
}

/// The gRPC framing of one message: its compressed flag, its length, its bytes.
pub fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(5 + payload.len());
    framed.push(flag);
    framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    framed.extend_from_slice(payload);
    framed
}

/// Calls `path` (`/adk.v1.SessionService/GetSession`) with `body`, framed messages as they
/// go on the wire, and the extra `headers`.
pub async fn raw_call(channel: &Channel, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> RawReply {
    use http_body::Body as _;
    let mut request = Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(tonic::body::Body::new(OneChunk(Some(body.into()))))
        .expect("a valid request");
    let mut channel = channel.clone();
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .expect("the channel is ready");
    let response = channel.call(request).await.expect("an HTTP answer");
    let (parts, mut body) = response.into_parts();
    let mut data = Vec::new();
    let mut trailers = HeaderMap::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        match frame.expect("the answer's body").into_data() {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(frame) => trailers.extend(frame.into_trailers().unwrap_or_default()),
        }
    }
    let mut messages = Vec::new();
    let mut rest = data.as_slice();
    while rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        messages.push((rest[0], rest[5..5 + len].to_vec()));
        rest = &rest[5 + len..];
    }
    assert!(rest.is_empty(), "the answer ends inside a message");
    let status = tonic::Status::from_header_map(&trailers)
        .or_else(|| tonic::Status::from_header_map(&parts.headers))
        .expect("a grpc-status");
    RawReply {
        headers: parts.headers,
        messages,
        status,
    }
}

/// A request body of one data frame.
struct OneChunk(Option<Bytes>);

impl http_body::Body for OneChunk {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|data| Ok(http_body::Frame::data(data))))
    }
}
