//! A client that cancels a call mid-request must look like a failure to the
//! handler, never like a complete request.
//!
//! tonic's request decoder treats a request body that ends with a CANCELLED error
//! (the client reset its HTTP/2 stream: it dropped the call, timed out, or its own
//! input failed) as a clean end of the stream (tonic 0.14, `codec/decode.rs`,
//! `StreamingInner::poll_frame`). For a client-streaming RPC that would make a cut-off
//! upload indistinguishable from a finished one, and the store would keep a truncated
//! artifact. [`CancelledRequestsFail`] wraps a service so the same reset reaches the
//! handler as an ABORTED error on its request stream instead.

use adk_grpc_core::{AdkError, Conflict};
use http_body::Frame;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::NamedService;
use tonic::{Code, Status};

/// A gRPC service whose request streams end with an error, not cleanly, when the
/// client cancels them. [`crate::GrpcServer::add_service`] wraps every service in it.
#[derive(Debug, Clone)]
pub struct CancelledRequestsFail<S> {
    inner: S,
}

impl<S> CancelledRequestsFail<S> {
    pub fn new(inner: S) -> Self {
        CancelledRequestsFail { inner }
    }
}

impl<S: NamedService> NamedService for CancelledRequestsFail<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for CancelledRequestsFail<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        self.inner.call(request.map(|body| Body::new(CancelIsAnError { body })))
    }
}

/// A request body whose CANCELLED errors become ABORTED ones, which tonic passes on.
struct CancelIsAnError {
    body: Body,
}

impl http_body::Body for CancelIsAnError {
    type Data = tonic::codegen::Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Status>>> {
        let frame = ready!(Pin::new(&mut self.get_mut().body).poll_frame(cx));
        Poll::Ready(frame.map(|frame| {
            frame.map_err(|status| match status.code() {
                Code::Cancelled => Status::from(AdkError::Aborted(
                    Conflict::RequestIncomplete,
                    format!(
                        "the client cancelled the call before its request was complete ({})",
                        status.message()
                    ),
                )),
                _ => status,
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    /// One data frame, then the given error.
    struct FailingBody {
        sent: bool,
        error: Option<Status>,
    }

    impl http_body::Body for FailingBody {
        type Data = tonic::codegen::Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Self::Data>, Status>>> {
            if !self.sent {
                self.sent = true;
                return Poll::Ready(Some(Ok(Frame::data(tonic::codegen::Bytes::from_static(b"x")))));
            }
            Poll::Ready(self.error.take().map(Err))
        }
    }

    async fn codes_after_the_data(error: Status) -> Vec<Code> {
        let mut body = CancelIsAnError {
            body: Body::new(FailingBody {
                sent: false,
                error: Some(error),
            }),
        };
        let mut codes = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            if let Err(status) = frame {
                codes.push(status.code());
            }
        }
        codes
    }

    #[tokio::test]
    async fn a_cancelled_request_is_an_abort_and_other_errors_pass_unchanged() {
        assert_eq!(codes_after_the_data(Status::cancelled("reset")).await, [Code::Aborted]);
        assert_eq!(
            codes_after_the_data(Status::unavailable("gone")).await,
            [Code::Unavailable]
        );
    }
}
