//! Helpers shared by the provider tests.
#![allow(dead_code)] // each test file uses a different subset

use adk_grpc_core::{AdkError, LlmResponse, LlmResponseStream, PartKind};
use futures::StreamExt;
use std::time::Duration;

/// Every test gives up after this long instead of hanging CI.
pub const TEST_LIMIT: Duration = Duration::from_secs(20);

/// Drains a stream: the items before the first error, and that error.
pub async fn collect(mut stream: LlmResponseStream) -> (Vec<LlmResponse>, Option<AdkError>) {
    let mut items = Vec::new();
    let drain = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(response) => items.push(response),
                Err(e) => return Some(e),
            }
        }
        None
    };
    let error = tokio::time::timeout(TEST_LIMIT, drain)
        .await
        .expect("the stream ended in time");
    (items, error)
}

/// Drains a stream that must succeed.
pub async fn collect_ok(stream: LlmResponseStream) -> Vec<LlmResponse> {
    let (items, error) = collect(stream).await;
    assert!(error.is_none(), "unexpected stream error: {error:?}");
    items
}

/// The text of a response's content.
pub fn text(response: &LlmResponse) -> String {
    response.content.as_ref().and_then(|c| c.text()).unwrap_or_default()
}

/// `(name, args, id)` of a response's function calls.
pub fn calls(response: &LlmResponse) -> Vec<(String, serde_json::Value, Option<String>)> {
    response
        .content
        .iter()
        .flat_map(|c| &c.parts)
        .filter_map(|p| match &p.kind {
            PartKind::FunctionCall { name, args, id } => Some((name.clone(), args.clone(), id.clone())),
            _ => None,
        })
        .collect()
}

/// Checks the shape every stream ends with: partials, then one complete response.
pub fn assert_stream_shape(items: &[LlmResponse]) {
    let (last, partials) = items.split_last().expect("at least the final response");
    assert!(
        partials
            .iter()
            .all(|r| r.partial == Some(true) && r.turn_complete.is_none()),
        "{partials:?}"
    );
    // No turn_complete: ADK sets it only on a live (bidi) stream's turn, which no model call here is.
    assert!(last.partial.is_none() && last.turn_complete.is_none(), "{last:?}");
}
