//! gRPC message compression (gzip, deflate, zstd) for every service a server runs,
//! health and reflection included, in one layer in front of all of them.
//!
//! Requests: a call with `grpc-encoding: gzip|deflate|zstd` has each compressed message
//! decompressed here, so every layer below (auth and quotas read a call's first message)
//! and every handler sees plain messages. The message limit (`--max-message-bytes`)
//! holds for the *decompressed* size: a compressed message is decompressed into at most
//! that many bytes, and one that would decompress to more is refused with
//! RESOURCE_EXHAUSTED as soon as the limit is passed, so a gzip bomb costs at most one
//! message's worth of memory and time. zstd frames may ask for a window of at most
//! max(8 MiB, the limit) (RFC 8878's minimum for decoders), never the 128 MiB libzstd
//! allows by default. Any other encoding is UNIMPLEMENTED with the
//! `grpc-accept-encoding` the gRPC compression spec asks for.
//!
//! Responses: when the client's `grpc-accept-encoding` names one of the three (zstd
//! preferred, then gzip, then deflate), each response message of at least
//! `--compression-min-bytes` is compressed (fast levels: the server's CPU is what it
//! fronts the store with) and sent so if that made it smaller; smaller messages go as
//! they are, which gRPC allows message by message.
//!
//! Why not tonic's own compression (its `gzip`/`deflate`/`zstd` features): the auth
//! layer reads a call's first message before tonic's codec would decompress it; tonic
//! compresses every message of a response, however small; and it decodes zstd with
//! libzstd's 128 MiB window limit.

use crate::message::{PREFIX_BYTES, message_len};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Frame;
use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tower_layer::Layer;

use adk_grpc_core::AdkError;

/// Default of `--compression-min-bytes`: response messages of at least this many bytes
/// are compressed for a client that accepts it. Below about a kilobyte compression
/// saves a few dozen bytes at best (gzip alone adds 18) for the CPU it costs; the
/// Connect clients use the same default (`compressMinBytes`).
pub const DEFAULT_COMPRESSION_MIN_BYTES: usize = 1024;

const ENCODING: &str = "grpc-encoding";
const ACCEPT_ENCODING: &str = "grpc-accept-encoding";
/// What this server accepts, for a client whose encoding it does not.
const ACCEPTED: &str = "gzip,deflate,zstd,identity";

/// The largest zstd window (as a power of two) a request may ask for, whatever the
/// message limit: 8 MiB, the least RFC 8878 asks decoders to support.
const ZSTD_MIN_WINDOW_LOG: u32 = 23;
/// zstd's own ceiling.
const ZSTD_MAX_WINDOW_LOG: u32 = 31;
/// A message of at least 4 times this is compressed only if this much of its start shrinks
/// by a tenth.
const SAMPLE_BYTES: usize = 16 * 1024;
/// Fast levels (gzip and deflate: 1 too): a response is compressed once per call, on the
/// server's CPU.
const ZSTD_LEVEL: i32 = 1;

/// Response compression (flattened into [`crate::GrpcArgs`]).
#[derive(Debug, Clone, clap::Args)]
pub struct CompressionArgs {
    /// Response messages of at least this many bytes are compressed for a client that accepts gzip, deflate or
    /// zstd (its grpc-accept-encoding); smaller ones go as they are; `off` compresses no response. Compressed
    /// requests (gzip, deflate, zstd) are accepted either way, with --max-message-bytes applied to their
    /// decompressed size
    #[arg(
        long,
        env = "ADK_COMPRESSION_MIN_BYTES",
        value_name = "BYTES|off",
        default_value = "1024",
        value_parser = parse_min_bytes,
    )]
    pub compression_min_bytes: ResponseCompression,
}

impl Default for CompressionArgs {
    fn default() -> Self {
        CompressionArgs {
            compression_min_bytes: ResponseCompression::MinBytes(DEFAULT_COMPRESSION_MIN_BYTES),
        }
    }
}

/// Which response messages are compressed for a client that accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseCompression {
    Off,
    /// Messages of at least this many bytes (encoded, before compression).
    MinBytes(usize),
}

fn parse_min_bytes(value: &str) -> Result<ResponseCompression, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("off") {
        return Ok(ResponseCompression::Off);
    }
    value
        .parse()
        .map(ResponseCompression::MinBytes)
        .map_err(|_| format!("{value:?} is neither a number of bytes nor `off`"))
}

/// A message encoding gRPC names in `grpc-encoding` and `grpc-accept-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Gzip,
    /// zlib's format (RFC 1950), as gRPC's `deflate` is everywhere.
    Deflate,
    Zstd,
}

impl Encoding {
    fn parse(name: &[u8]) -> Option<Encoding> {
        match name {
            b"gzip" => Some(Encoding::Gzip),
            b"deflate" => Some(Encoding::Deflate),
            b"zstd" => Some(Encoding::Zstd),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Zstd => "zstd",
        }
    }

    /// The encoding to compress responses with for a client whose `grpc-accept-encoding`
    /// is `headers`': the best of the three it names (zstd compresses better and faster;
    /// gzip and deflate are the same algorithm), none when it names none.
    fn accepted_by(headers: &http::HeaderMap) -> Option<Encoding> {
        let mut best = None;
        for value in headers.get_all(ACCEPT_ENCODING) {
            for name in value.as_bytes().split(|b| *b == b',') {
                match Encoding::parse(name.trim_ascii()) {
                    Some(Encoding::Zstd) => return Some(Encoding::Zstd),
                    Some(Encoding::Gzip) => best = Some(Encoding::Gzip),
                    Some(Encoding::Deflate) if best.is_none() => best = Some(Encoding::Deflate),
                    _ => {}
                }
            }
        }
        best
    }

    /// `compressed` decompressed behind a message prefix (flag 0, its length), or
    /// [`Inflated::TooLarge`] as soon as it passes `limit` bytes.
    fn decompress(self, compressed: &[u8], limit: usize) -> Result<Bytes, Inflated> {
        // The guess is capped by the limit, so a bomb does not size the buffer either.
        let guess = compressed.len().saturating_mul(4).clamp(64, limit.saturating_add(1));
        let mut message = Vec::with_capacity(PREFIX_BYTES + guess);
        message.extend_from_slice(&[0; PREFIX_BYTES]);
        // One byte past the limit is enough to know the message is over it.
        let bounded = (limit as u64).saturating_add(1);
        let read = match self {
            Encoding::Gzip => flate2::bufread::GzDecoder::new(compressed)
                .take(bounded)
                .read_to_end(&mut message),
            Encoding::Deflate => flate2::bufread::ZlibDecoder::new(compressed)
                .take(bounded)
                .read_to_end(&mut message),
            Encoding::Zstd => zstd::stream::read::Decoder::with_buffer(compressed).and_then(|mut decoder| {
                decoder.window_log_max(zstd_window_log_max(limit))?;
                decoder.take(bounded).read_to_end(&mut message)
            }),
        };
        let size = read.map_err(Inflated::Corrupt)?;
        if size > limit {
            return Err(Inflated::TooLarge);
        }
        message[1..PREFIX_BYTES].copy_from_slice(&(size as u32).to_be_bytes());
        Ok(Bytes::from(message))
    }

    /// `message` compressed, by this thread's compressor of the kind.
    fn compress(self, message: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Encoding::Gzip => reusing(&GZIP, new_deflate, |encoder| {
                // RFC 1952: the header (no name, no time, unknown OS), the deflate stream,
                // then the CRC-32 and the length of the original.
                let mut gzip = Vec::with_capacity(message.len() / 2 + 18);
                gzip.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
                *encoder.get_mut() = gzip;
                encoder.write_all(message)?;
                let mut gzip = encoder.reset(Vec::new())?;
                let mut crc = flate2::Crc::new();
                crc.update(message);
                gzip.extend_from_slice(&crc.sum().to_le_bytes());
                gzip.extend_from_slice(&(message.len() as u32).to_le_bytes());
                Ok(gzip)
            }),
            Encoding::Deflate => reusing(&ZLIB, new_zlib, |encoder| {
                *encoder.get_mut() = Vec::with_capacity(message.len() / 2 + 6);
                encoder.write_all(message)?;
                encoder.reset(Vec::new())
            }),
            Encoding::Zstd => reusing(&ZSTD, new_zstd, |compressor| compressor.compress(message)),
        }
    }
}

thread_local! {
    // One compressor of each kind per thread, kept from message to message: setting one up
    // (miniz_oxide zeroes its tables, libzstd allocates a context) costs more than
    // compressing a few kilobytes with it (about 20 µs against 5).
    static GZIP: RefCell<Option<flate2::write::DeflateEncoder<Vec<u8>>>> = const { RefCell::new(None) };
    static ZLIB: RefCell<Option<flate2::write::ZlibEncoder<Vec<u8>>>> = const { RefCell::new(None) };
    static ZSTD: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

fn new_deflate() -> std::io::Result<flate2::write::DeflateEncoder<Vec<u8>>> {
    Ok(flate2::write::DeflateEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ))
}

fn new_zlib() -> std::io::Result<flate2::write::ZlibEncoder<Vec<u8>>> {
    Ok(flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast()))
}

fn new_zstd() -> std::io::Result<zstd::bulk::Compressor<'static>> {
    zstd::bulk::Compressor::new(ZSTD_LEVEL)
}

/// `compress` with this thread's compressor in `slot` (made by `new` the first time), which
/// is dropped if it fails, so no half-written stream is ever continued.
fn reusing<C, T>(
    slot: &'static std::thread::LocalKey<RefCell<Option<C>>>,
    new: fn() -> std::io::Result<C>,
    compress: impl FnOnce(&mut C) -> std::io::Result<T>,
) -> std::io::Result<T> {
    slot.with_borrow_mut(|kept| {
        let compressor = match kept {
            Some(compressor) => compressor,
            None => kept.insert(new()?),
        };
        let compressed = compress(compressor);
        if compressed.is_err() {
            *kept = None;
        }
        compressed
    })
}

/// Why a compressed message could not be decompressed.
enum Inflated {
    TooLarge,
    Corrupt(std::io::Error),
}

/// The largest window (log2) a zstd request frame may ask for: enough for any message
/// within `limit`, and at least 8 MiB.
fn zstd_window_log_max(limit: usize) -> u32 {
    let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
    needed.clamp(ZSTD_MIN_WINDOW_LOG, ZSTD_MAX_WINDOW_LOG)
}

/// Compressed requests decompressed, and responses compressed for clients that accept it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompressionLayer {
    /// `--max-message-bytes`: no request message decompresses to more.
    pub(crate) max_message_bytes: usize,
    pub(crate) responses: ResponseCompression,
}

impl<S> Layer<S> for CompressionLayer {
    type Service = CompressionService<S>;

    fn layer(&self, inner: S) -> CompressionService<S> {
        CompressionService { inner, layer: *self }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CompressionService<S> {
    inner: S,
    layer: CompressionLayer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<http::Request<Body>> for CompressionService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Error: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<http::Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let respond_with = match self.layer.responses {
            ResponseCompression::Off => None,
            ResponseCompression::MinBytes(min_bytes) => {
                Encoding::accepted_by(request.headers()).map(|encoding| (encoding, min_bytes))
            }
        };
        if let Some(value) = request.headers().get(ENCODING)
            && value.as_bytes() != b"identity"
        {
            let Some(encoding) = Encoding::parse(value.as_bytes()) else {
                let status = unsupported(value);
                return Box::pin(std::future::ready(Ok(status.into_http())));
            };
            // Below this layer the call is an uncompressed one.
            request.headers_mut().remove(ENCODING);
            let path: Arc<str> = request.uri().path().into();
            let limit = self.layer.max_message_bytes;
            request = request.map(|body| {
                Body::new(Decompressing {
                    body,
                    encoding,
                    limit,
                    path,
                    buffered: BytesMut::new(),
                    trailers: None,
                    ended: false,
                })
            });
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match respond_with {
                Some((encoding, min_bytes)) => compressed(response, encoding, min_bytes),
                None => response,
            })
        })
    }
}

/// UNIMPLEMENTED for a request in an encoding this server does not have, with the ones it has.
fn unsupported(value: &http::HeaderValue) -> Status {
    let name = String::from_utf8_lossy(value.as_bytes());
    let mut status = Status::from(AdkError::Unimplemented(format!(
        "the request is compressed with {name:?}, which this server does not decompress; it accepts gzip, deflate \
         and zstd (grpc-accept-encoding)"
    )));
    status
        .metadata_mut()
        .insert(ACCEPT_ENCODING, tonic::metadata::MetadataValue::from_static(ACCEPTED));
    status
}

/// `response` with its messages of at least `min_bytes` compressed with `encoding`;
/// as it is when it carries no messages (a trailers-only error) or is not gRPC.
fn compressed(mut response: http::Response<Body>, encoding: Encoding, min_bytes: usize) -> http::Response<Body> {
    let headers = response.headers();
    let grpc = headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"));
    if !grpc || headers.contains_key("grpc-status") || headers.contains_key(ENCODING) {
        return response;
    }
    response
        .headers_mut()
        .insert(ENCODING, http::HeaderValue::from_static(encoding.name()));
    response.map(|body| {
        Body::new(Compressing {
            body,
            encoding,
            min_bytes,
            partial: BytesMut::new(),
            trailers: None,
        })
    })
}

/// A request body whose compressed messages come out decompressed, one whole message
/// per data frame.
struct Decompressing {
    body: Body,
    encoding: Encoding,
    limit: usize,
    path: Arc<str>,
    /// Received, not passed on yet: at most one message and the start of the next.
    buffered: BytesMut,
    /// The request's trailers, passed on after the messages before them.
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl Decompressing {
    /// The first whole message of `buffered`, decompressed.
    fn next_message(&mut self) -> Result<Option<Bytes>, Status> {
        let Some(len) = message_len(&self.buffered) else {
            return Ok(None);
        };
        // Compressed or not, a message longer than the limit on the wire is over it.
        if len > self.limit {
            return Err(crate::limits::request_too_large(&self.path, Some(len), self.limit));
        }
        if self.buffered.len() < PREFIX_BYTES + len {
            self.buffered.reserve(PREFIX_BYTES + len - self.buffered.len());
            return Ok(None);
        }
        let mut message = self.buffered.split_to(PREFIX_BYTES + len);
        if message[0] != 1 {
            // Plain (or a bad flag, which tonic refuses).
            return Ok(Some(message.freeze()));
        }
        message.advance(PREFIX_BYTES);
        match self.encoding.decompress(&message, self.limit) {
            Ok(plain) => Ok(Some(plain)),
            Err(Inflated::TooLarge) => Err(crate::limits::request_decompresses_too_large(
                &self.path,
                self.encoding.name(),
                self.limit,
            )),
            Err(Inflated::Corrupt(err)) => Err(AdkError::invalid_with(
                "request",
                format!(
                    "the request message does not decompress as {} (its grpc-encoding): {err}",
                    self.encoding.name()
                ),
            )
            .into()),
        }
    }
}

impl http_body::Body for Decompressing {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            match this.next_message() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(Frame::data(message)))),
                Ok(None) => {}
                Err(status) => {
                    // Nothing more of this request is read.
                    this.ended = true;
                    this.buffered.clear();
                    this.trailers = None;
                    return Poll::Ready(Some(Err(status)));
                }
            }
            if this.ended {
                // A message cut short goes on as it is, for tonic to refuse.
                if !this.buffered.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(this.buffered.split().freeze()))));
                }
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.buffered.extend_from_slice(&data),
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        this.ended = true;
                    }
                },
                Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                None => this.ended = true,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.buffered.is_empty() && self.trailers.is_none()
    }
}

/// A response body whose messages of at least `min_bytes` go out compressed.
struct Compressing {
    body: Body,
    encoding: Encoding,
    min_bytes: usize,
    /// The start of a message whose end has not come yet.
    partial: BytesMut,
    /// Trailers that came after a message cut short, sent after it.
    trailers: Option<Frame<Bytes>>,
}

impl Compressing {
    /// `data` with its big messages compressed; None while no message is whole.
    fn compress(&mut self, data: Bytes) -> Result<Option<Bytes>, Status> {
        if self.partial.is_empty() && self.only_small_messages(&data) {
            // The usual case: whole messages, none worth compressing, passed on without a copy.
            return Ok(Some(data));
        }
        self.partial.extend_from_slice(&data);
        let mut out = BytesMut::new();
        while let Some(len) = message_len(&self.partial)
            && self.partial.len() >= PREFIX_BYTES + len
        {
            let message = self.partial.split_to(PREFIX_BYTES + len);
            if message[0] != 0 || len < self.min_bytes {
                out.extend_from_slice(&message);
                continue;
            }
            let payload = &message[PREFIX_BYTES..];
            let compress = |bytes: &[u8]| {
                self.encoding
                    .compress(bytes)
                    .map_err(|err| Status::internal(format!("cannot compress a response message: {err}")))
            };
            // A big message is tried on its start first: media and archives (an artifact's
            // chunks) do not shrink, and compressing megabytes of them costs milliseconds.
            if len >= 4 * SAMPLE_BYTES && compress(&payload[..SAMPLE_BYTES])?.len() * 10 > SAMPLE_BYTES * 9 {
                out.extend_from_slice(&message);
                continue;
            }
            let packed = compress(payload)?;
            if packed.len() >= len {
                // Incompressible after all: the client is spared decompressing it.
                out.extend_from_slice(&message);
                continue;
            }
            out.reserve(PREFIX_BYTES + packed.len());
            out.put_u8(1);
            out.put_u32(packed.len() as u32);
            out.extend_from_slice(&packed);
        }
        Ok((!out.is_empty()).then(|| out.freeze()))
    }

    /// Whether `data` is whole messages, each too small to compress.
    fn only_small_messages(&self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            match message_len(data) {
                Some(len) if len < self.min_bytes && data.len() >= PREFIX_BYTES + len => {
                    data = &data[PREFIX_BYTES + len..];
                }
                _ => return false,
            }
        }
        true
    }
}

impl http_body::Body for Compressing {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(trailers)));
        }
        loop {
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => match this.compress(data) {
                        Ok(Some(out)) => return Poll::Ready(Some(Ok(Frame::data(out)))),
                        Ok(None) => {}
                        Err(status) => return Poll::Ready(Some(Err(status))),
                    },
                    Err(trailers) if this.partial.is_empty() => return Poll::Ready(Some(Ok(trailers))),
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        return Poll::Ready(Some(Ok(Frame::data(this.partial.split().freeze()))));
                    }
                },
                Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                None if this.partial.is_empty() => return Poll::Ready(None),
                None => return Poll::Ready(Some(Ok(Frame::data(this.partial.split().freeze())))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.partial.is_empty() && self.trailers.is_none() && self.body.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![flag];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    /// A body of the given data frames, then `trailers` when given.
    struct Frames(std::collections::VecDeque<Frame<Bytes>>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn body(chunks: Vec<Vec<u8>>, trailers: bool) -> Body {
        let mut frames: std::collections::VecDeque<_> =
            chunks.into_iter().map(|c| Frame::data(Bytes::from(c))).collect();
        if trailers {
            let mut map = http::HeaderMap::new();
            map.insert("grpc-status", http::HeaderValue::from_static("0"));
            frames.push_back(Frame::trailers(map));
        }
        Body::new(Frames(frames))
    }

    /// Every data byte of `body` and whether trailers came last, or the first error.
    async fn drain(
        mut body: impl http_body::Body<Data = Bytes, Error = Status> + Unpin,
    ) -> Result<(Vec<u8>, bool), Status> {
        let mut data = Vec::new();
        let mut trailers = false;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame?;
            assert!(!trailers, "data after the trailers");
            match frame.into_data() {
                Ok(bytes) => data.extend_from_slice(&bytes),
                Err(_) => trailers = true,
            }
        }
        Ok((data, trailers))
    }

    fn decompressing(encoding: Encoding, limit: usize, body: Body) -> Decompressing {
        Decompressing {
            body,
            encoding,
            limit,
            path: "/adk.v1.SessionService/AppendEvent".into(),
            buffered: BytesMut::new(),
            trailers: None,
            ended: false,
        }
    }

    const ALL: [Encoding; 3] = [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd];

    #[tokio::test]
    async fn compressed_requests_come_out_plain_whatever_their_chunking() {
        let text = b"the same words again and again ".repeat(200);
        for encoding in ALL {
            let mut wire = framed(1, &encoding.compress(&text).unwrap());
            wire.extend(framed(0, b"plain"));
            wire.extend(framed(1, &encoding.compress(b"").unwrap()));
            let mut expected = framed(0, &text);
            expected.extend(framed(0, b"plain"));
            expected.extend(framed(0, b""));
            // In one piece, and cut every 7 bytes (a prefix split across frames included).
            for chunks in [vec![wire.clone()], wire.chunks(7).map(<[u8]>::to_vec).collect()] {
                let (data, trailers) = drain(decompressing(encoding, 1 << 20, body(chunks, true)))
                    .await
                    .unwrap();
                assert!(data == expected && trailers, "{encoding:?}");
            }
        }
    }

    #[tokio::test]
    async fn a_message_decompressing_past_the_limit_is_refused_naming_it() {
        let limit = 64 * 1024;
        let zeros = vec![0u8; limit + 1];
        for encoding in ALL {
            let wire = framed(1, &encoding.compress(&zeros).unwrap());
            assert!(wire.len() < 1024, "{encoding:?} compresses zeros");
            let err = drain(decompressing(encoding, limit, body(vec![wire], true)))
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{encoding:?}");
            assert!(
                err.message()
                    .contains(&format!("AppendEvent request message ({})", encoding.name()))
                    && err.message().contains("--max-message-bytes"),
                "{}",
                err.message()
            );
            // Exactly the limit is fine.
            let wire = framed(1, &encoding.compress(&zeros[..limit]).unwrap());
            let (data, _) = drain(decompressing(encoding, limit, body(vec![wire], false)))
                .await
                .unwrap();
            assert_eq!(data.len(), PREFIX_BYTES + limit);
        }
    }

    #[tokio::test]
    async fn garbage_is_an_invalid_argument_and_a_long_prefix_is_refused_before_the_bytes() {
        let err = drain(decompressing(
            Encoding::Gzip,
            1024,
            body(vec![framed(1, b"not gzip")], false),
        ))
        .await
        .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
        assert!(
            err.message().contains("does not decompress as gzip"),
            "{}",
            err.message()
        );
        // Only the prefix arrives: refused on the length it announces.
        let prefix = [1, 0, 0, 8, 0].to_vec();
        let err = drain(decompressing(Encoding::Gzip, 1024, body(vec![prefix], false)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
        assert!(err.message().contains("2048 bytes"), "{}", err.message());
    }

    #[test]
    fn zstd_frames_asking_for_a_huge_window_are_refused() {
        // A frame header (magic, descriptor: no content size, not single-segment) whose
        // window descriptor asks for 2^(10+17) = 128 MiB (libzstd's default limit), then one
        // empty last raw block.
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 17 << 3, 0x01, 0x00, 0x00];
        assert!(matches!(
            Encoding::Zstd.decompress(&frame, 4 << 20),
            Err(Inflated::Corrupt(_))
        ));
        // The same frame with an 8 MiB window decodes (to nothing).
        let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3, 0x01, 0x00, 0x00];
        assert_eq!(
            Encoding::Zstd.decompress(&frame, 4 << 20).ok().map(|m| m.len()),
            Some(PREFIX_BYTES)
        );
        assert_eq!(zstd_window_log_max(4 << 20), 23);
        assert_eq!(zstd_window_log_max(64 << 20), 26);
        assert_eq!(zstd_window_log_max((64 << 20) + 1), 27);
    }

    fn compressing(encoding: Encoding, min_bytes: usize, body: Body) -> Compressing {
        Compressing {
            body,
            encoding,
            min_bytes,
            partial: BytesMut::new(),
            trailers: None,
        }
    }

    /// The messages of `data`: (compressed?, payload decompressed).
    fn messages(encoding: Encoding, mut data: &[u8]) -> Vec<(bool, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(len) = message_len(data) {
            let payload = &data[PREFIX_BYTES..PREFIX_BYTES + len];
            out.push(match data[0] {
                0 => (false, payload.to_vec()),
                _ => {
                    let plain = encoding.decompress(payload, usize::MAX >> 1).ok().unwrap();
                    (true, plain[PREFIX_BYTES..].to_vec())
                }
            });
            data = &data[PREFIX_BYTES + len..];
        }
        assert!(data.is_empty(), "a message cut short");
        out
    }

    #[tokio::test]
    async fn responses_compress_only_messages_over_the_threshold_that_shrink() {
        let big = b"an event's text, said twice; ".repeat(100);
        let small = b"ok".to_vec();
        // xorshift64: bytes no encoder can shrink.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut noise: Vec<u8> = (0..SAMPLE_BYTES + 8)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let media = noise.clone();
        noise.truncate(4096);
        for encoding in ALL {
            let mut wire = framed(0, &small);
            wire.extend(framed(0, &big));
            wire.extend(framed(0, &noise));
            for chunks in [vec![wire.clone()], wire.chunks(100).map(<[u8]>::to_vec).collect()] {
                let (data, trailers) = drain(compressing(encoding, 1024, body(chunks, true))).await.unwrap();
                assert!(trailers);
                let received = messages(encoding, &data);
                let flags: Vec<bool> = received.iter().map(|(compressed, _)| *compressed).collect();
                assert_eq!(
                    flags,
                    [false, true, false],
                    "{encoding:?}: only the big text is compressed"
                );
                assert!(
                    received
                        .into_iter()
                        .map(|(_, payload)| payload)
                        .eq([small.clone(), big.clone(), noise.clone()]),
                    "{encoding:?}: the payloads came through"
                );
            }
        }
        // A big message whose start does not shrink is not compressed at all, though its rest would.
        let mut media = media;
        media.extend(b"compressible ".repeat(50_000));
        let wire = framed(0, &media);
        let (data, _) = drain(compressing(Encoding::Gzip, 1024, body(vec![wire.clone()], false)))
            .await
            .unwrap();
        assert!(data == wire, "sent as it is");
        // Small messages only: the very bytes, not a copy.
        let wire = Bytes::from([framed(0, &small), framed(0, &small)].concat());
        let mut body = compressing(Encoding::Gzip, 1024, body(vec![], false));
        let out = body.compress(wire.clone()).unwrap().unwrap();
        assert_eq!(out.as_ptr(), wire.as_ptr());
    }

    #[test]
    fn a_kept_compressor_makes_a_whole_stream_of_each_message() {
        for encoding in ALL {
            let messages = [b"first ".repeat(300), Vec::new(), b"third, longer ".repeat(900)];
            for message in &messages {
                let packed = encoding.compress(message).unwrap();
                let plain = encoding.decompress(&packed, 1 << 20).ok().unwrap();
                assert!(plain[PREFIX_BYTES..] == message[..], "{encoding:?}");
            }
        }
        // The gzip stream is standard: the crate's own decoder reads it, CRC and length checked.
        let packed = Encoding::Gzip.compress(b"standard gzip").unwrap();
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&packed[..])
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, "standard gzip");
    }

    #[test]
    fn the_best_accepted_encoding_is_chosen() {
        let accepting = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(ACCEPT_ENCODING, http::HeaderValue::from_static(value));
            Encoding::accepted_by(&headers)
        };
        assert_eq!(accepting("identity,deflate,gzip"), Some(Encoding::Gzip));
        assert_eq!(accepting("gzip, br"), Some(Encoding::Gzip));
        assert_eq!(accepting("deflate"), Some(Encoding::Deflate));
        assert_eq!(accepting("gzip,zstd"), Some(Encoding::Zstd));
        assert_eq!(accepting("identity, br"), None);
        assert_eq!(Encoding::accepted_by(&http::HeaderMap::new()), None);
    }

    #[test]
    fn the_threshold_is_bytes_or_off() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            compression: CompressionArgs,
        }
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("bin").chain(args.iter().copied()))
                .map(|c| c.compression.compression_min_bytes)
        };
        assert_eq!(
            parse(&[]).unwrap(),
            ResponseCompression::MinBytes(DEFAULT_COMPRESSION_MIN_BYTES)
        );
        assert_eq!(
            parse(&["--compression-min-bytes", "0"]).unwrap(),
            ResponseCompression::MinBytes(0)
        );
        assert_eq!(
            parse(&["--compression-min-bytes", "off"]).unwrap(),
            ResponseCompression::Off
        );
        assert!(parse(&["--compression-min-bytes", "1k"]).is_err());
        assert_eq!(
            CompressionArgs::default().compression_min_bytes,
            ResponseCompression::MinBytes(DEFAULT_COMPRESSION_MIN_BYTES)
        );
    }
}
