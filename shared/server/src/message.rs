//! The unary message size limit, enforced with a status that says what to do
//! instead. Replies are checked before they are sent because tonic's own encoder
//! limit would only produce an opaque error after the work is done, and a client
//! decoder over its limit gives an error that does not name the way out.

use adk_grpc_core::AdkError;

/// The prefix of every gRPC message on the wire: a compression flag and a 4-byte
/// big-endian length. The layers that read request bodies before tonic does
/// (compression, authentication) parse it here.
pub(crate) const PREFIX_BYTES: usize = 5;

/// The length of the message at the start of `buf`, once its whole prefix is there.
pub(crate) fn message_len(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..PREFIX_BYTES)?;
    Some(u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize)
}

/// Whether the message at the start of `buf` is flagged compressed.
pub(crate) fn is_compressed(buf: &[u8]) -> bool {
    buf.first().is_some_and(|flag| *flag != 0)
}
use prost::Message;
use std::fmt::Display;
use tonic::{Response, Status};

/// RESOURCE_EXHAUSTED for a reply of (at least) `size` bytes over the `limit`:
/// names `what` is too large and what the client should do `instead`. Also for
/// refusing early, before the reply is built, when its payload alone is too large.
pub fn message_too_large(what: impl Display, size: u64, limit: usize, instead: &str) -> Status {
    AdkError::limit(
        "max_message_bytes",
        limit,
        format!("{what} is {size} bytes, over the {limit}-byte message limit: {instead}"),
    )
    .into()
}

/// `reply` as a response when its encoding fits in `limit` bytes; otherwise
/// [`message_too_large`]. `what` is only written out for the refusal (`format_args!`
/// costs nothing on the way of a reply that fits).
pub fn fit_in_message<M: Message>(
    reply: M,
    limit: usize,
    what: impl Display,
    instead: &str,
) -> Result<Response<M>, Status> {
    check_fits(&reply, limit, what, instead)?;
    Ok(Response::new(reply))
}

/// [`fit_in_message`]'s check alone, for a `what` that describes the reply itself.
pub fn check_fits<M: Message>(reply: &M, limit: usize, what: impl Display, instead: &str) -> Result<(), Status> {
    let size = reply.encoded_len();
    if size > limit {
        return Err(message_too_large(what, size as u64, limit, instead));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_over_the_limit_name_the_way_out() {
        let reply = adk_grpc_proto::v1::ListArtifactsResponse {
            file_names: vec!["x".repeat(100)],
        };
        assert!(fit_in_message(reply.clone(), 1024, "a list", "page").is_ok());
        let err = fit_in_message(reply, 50, "a list", "ask for less").unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(
            err.message()
                .contains("a list is 102 bytes, over the 50-byte message limit: ask for less"),
            "{}",
            err.message()
        );
    }
}
