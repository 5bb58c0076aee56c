//! Model callbacks: code that sees (and may change) each model request and response.

use adk_grpc_core::{CallbackContext, LlmRequest, LlmResponse, Result};
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;

/// What a before-model callback decides.
// One value per model call, moved once: boxing the response would only make
// callbacks harder to write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum BeforeModel {
    /// Send this (possibly modified) request to the model.
    Continue(LlmRequest),
    /// Skip the model: use this response as its reply.
    Respond(LlmResponse),
}

pub(crate) type BeforeModelFn =
    Arc<dyn Fn(Arc<dyn CallbackContext>, LlmRequest) -> BoxFuture<'static, Result<BeforeModel>> + Send + Sync>;
pub(crate) type AfterModelFn =
    Arc<dyn Fn(Arc<dyn CallbackContext>, LlmResponse) -> BoxFuture<'static, Result<LlmResponse>> + Send + Sync>;

pub(crate) fn before_model<F, Fut>(callback: F) -> BeforeModelFn
where
    F: Fn(Arc<dyn CallbackContext>, LlmRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<BeforeModel>> + Send + 'static,
{
    Arc::new(move |ctx, request| Box::pin(callback(ctx, request)))
}

pub(crate) fn after_model<F, Fut>(callback: F) -> AfterModelFn
where
    F: Fn(Arc<dyn CallbackContext>, LlmResponse) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<LlmResponse>> + Send + 'static,
{
    Arc::new(move |ctx, response| Box::pin(callback(ctx, response)))
}
