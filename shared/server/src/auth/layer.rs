//! The tower layer around every route that authenticates each call and authorizes
//! what it touches, for unary and streaming methods alike: it reads the call's
//! first request message off the body (the whole request of a unary or
//! server-streaming call; the header of an upload), decodes it with the method's
//! row of the [`ScopeTable`], checks it against the credential, then hands the
//! handler the body with that message put back in front.
//!
//! The same decoded message names the user whose concurrent streams and runs are
//! counted (quota.rs): those methods are read here with auth off too.

use super::scope::{Scope, ScopeTable, authorize};
use super::{Authenticator, Principal};
use crate::message::{PREFIX_BYTES, is_compressed, message_len};
use crate::quota::{self, Quotas};
use adk_grpc_core::AdkError;
use http_body::{Body as _, Frame};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Bytes, Service, http};
use tower_layer::Layer;

#[derive(Clone)]
pub(crate) struct AuthLayer {
    shared: Arc<Shared>,
}

struct Shared {
    /// None: auth is off, every call passes untouched.
    authenticator: Option<Arc<Authenticator>>,
    scopes: ScopeTable,
    public_health: bool,
    public_reflection: bool,
    max_message_bytes: usize,
    quotas: Quotas,
}

impl AuthLayer {
    pub(crate) fn new(
        authenticator: Option<Arc<Authenticator>>,
        public_health: bool,
        public_reflection: bool,
        max_message_bytes: usize,
        quotas: Quotas,
    ) -> AuthLayer {
        AuthLayer {
            shared: Arc::new(Shared {
                authenticator,
                scopes: ScopeTable::new(),
                public_health,
                public_reflection,
                max_message_bytes,
                quotas,
            }),
        }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct AuthService<S> {
    inner: S,
    shared: Arc<Shared>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<http::Request<Body>> for AuthService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Error: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<http::Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let shared = self.shared.clone();
        let path = request.uri().path();
        let quota = quota::kind(path);
        let Some(authenticator) = &shared.authenticator else {
            return match quota {
                Some(kind) => self.counted(request, kind),
                None => Box::pin(self.inner.call(request)),
            };
        };
        let service = path
            .strip_prefix('/')
            .and_then(|p| p.split_once('/'))
            .map_or("", |(s, _)| s);
        let public = (shared.public_health && service == "grpc.health.v1.Health")
            || (shared.public_reflection && service.starts_with("grpc.reflection."));
        if public {
            return Box::pin(self.inner.call(request));
        }
        let principal = match authenticator.authenticate(
            request
                .headers()
                .get(http::header::AUTHORIZATION)
                .map(|value| value.as_bytes()),
        ) {
            Ok(principal) => principal,
            Err(status) => return refuse(status),
        };
        let Some(extract) = shared.scopes.extractor(path) else {
            return refuse(Status::from(AdkError::PermissionDenied(format!(
                "{path} is not a method this server authorizes"
            ))));
        };
        // The service that was polled ready serves this call; a fresh clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let max_message_bytes = shared.max_message_bytes;
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let (first, body) = match first_message(body, parts.uri.path(), max_message_bytes).await {
                Ok(read) => read,
                Err(status) => return Ok(status.into_http()),
            };
            let scope = match extract(&first).and_then(|scope| authorize(&principal, &scope).map(|()| scope)) {
                Ok(scope) => scope,
                Err(status) => return Ok(status.into_http()),
            };
            let request = http::Request::from_parts(parts, body);
            let held = match (quota, &scope) {
                (Some(kind), Scope::User { user, .. }) => match shared.quotas.acquire(kind, user, &request) {
                    Ok(held) => Some(held),
                    Err(status) => return Ok(status.into_http()),
                },
                _ => None,
            };
            let (mut parts, body) = request.into_parts();
            parts.extensions.insert::<Principal>(principal);
            let response = inner.call(http::Request::from_parts(parts, body)).await?;
            Ok(match held {
                Some(held) => quota::hold(response, held),
                None => response,
            })
        })
    }
}

impl<S> AuthService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Error: Send + 'static,
    S::Future: Send + 'static,
{
    /// With auth off: a quota'd call, counted against the user its first message names.
    /// A message that does not decode goes on uncounted, for the handler to refuse.
    fn counted(
        &mut self,
        request: http::Request<Body>,
        kind: quota::Kind,
    ) -> BoxFuture<http::Response<Body>, S::Error> {
        let shared = self.shared.clone();
        let extract = shared.scopes.extractor(request.uri().path());
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let (first, body) = match first_message(body, parts.uri.path(), shared.max_message_bytes).await {
                Ok(read) => read,
                Err(status) => return Ok(status.into_http()),
            };
            let request = http::Request::from_parts(parts, body);
            let held = match extract.map(|extract| extract(&first)) {
                Some(Ok(Scope::User { user, .. })) => match shared.quotas.acquire(kind, &user, &request) {
                    Ok(held) => Some(held),
                    Err(status) => return Ok(status.into_http()),
                },
                _ => None,
            };
            let response = inner.call(request).await?;
            Ok(match held {
                Some(held) => quota::hold(response, held),
                None => response,
            })
        })
    }
}

fn refuse<E: Send + 'static>(status: Status) -> BoxFuture<http::Response<Body>, E> {
    Box::pin(std::future::ready(Ok(status.into_http())))
}

/// The payload of the body's first gRPC message of the method at `path` (empty when the body holds none),
/// and a body that yields everything read so far and then the rest.
async fn first_message(mut body: Body, path: &str, max_message_bytes: usize) -> Result<(Bytes, Body), Status> {
    let mut frames: VecDeque<Frame<Bytes>> = VecDeque::new();
    let mut buffered: Vec<u8> = Vec::new();
    let mut ended = false;
    loop {
        if let Some(length) = message_len(&buffered) {
            // Compressed messages arrive decompressed (compression.rs): a flag still set is a
            // message marked compressed in a call that names no grpc-encoding.
            if is_compressed(&buffered) {
                return Err(Status::from(AdkError::invalid_with(
                    "request",
                    "the request message is marked compressed but the call has no grpc-encoding header saying how",
                )));
            }
            if length > max_message_bytes {
                return Err(crate::limits::request_too_large(path, Some(length), max_message_bytes));
            }
            if buffered.len() >= PREFIX_BYTES + length {
                let message = Bytes::copy_from_slice(&buffered[PREFIX_BYTES..PREFIX_BYTES + length]);
                return Ok((
                    message,
                    Body::new(Replayed {
                        frames,
                        rest: body,
                        ended,
                    }),
                ));
            }
        }
        if ended {
            return match buffered.is_empty() {
                true => Ok((
                    Bytes::new(),
                    Body::new(Replayed {
                        frames,
                        rest: body,
                        ended,
                    }),
                )),
                false => Err(Status::from(AdkError::invalid_with(
                    "request",
                    "the request ended inside a message",
                ))),
            };
        }
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    buffered.extend_from_slice(data);
                }
                frames.push_back(frame);
            }
            Some(Err(status)) => return Err(status),
            None => ended = true,
        }
    }
}

/// Frames already read, then the rest of the original body.
struct Replayed {
    frames: VecDeque<Frame<Bytes>>,
    rest: Body,
    ended: bool,
}

impl http_body::Body for Replayed {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if let Some(frame) = this.frames.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        Pin::new(&mut this.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && (self.ended || self.rest.is_end_stream())
    }
}
