//! An upload's body as the core hands it to a backend: held to its declared size and
//! to the size limit, checked as UTF-8 when it is text, and re-cut into storage chunks.

use super::{ByteStream, DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, body_of_declared_size};
use crate::error::{AdkError, Result};
use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The size limit of an artifact version and the size of the chunks it is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// The largest version an upload may store (`--max-artifact-bytes`).
    pub max_bytes: u64,
    /// Size of the storage chunks (Redis: one key each).
    pub chunk_bytes: usize,
}

impl UploadLimits {
    /// `chunk_bytes` as [`piece_size`] takes it: 0 is the default, too much is capped.
    pub fn new(max_bytes: u64, chunk_bytes: usize) -> UploadLimits {
        UploadLimits {
            max_bytes,
            chunk_bytes: piece_size(chunk_bytes),
        }
    }
}

/// A requested chunk size as used: 0 means the default, and anything above
/// [`MAX_CHUNK_BYTES`] (the most that fits a gRPC message comfortably) is capped.
pub fn piece_size(requested: usize) -> usize {
    match requested {
        0 => DEFAULT_CHUNK_BYTES,
        n => n.min(MAX_CHUNK_BYTES),
    }
}

pub(super) fn too_large(max_bytes: u64) -> AdkError {
    AdkError::limit(
        "max_artifact_bytes",
        max_bytes,
        format!("artifact exceeds the maximum size of {max_bytes} bytes (--max-artifact-bytes)"),
    )
}

/// An upload's body as storage chunks: every chunk `chunk_bytes` long except a
/// shorter last one, however the client cut its stream. Holds at most one chunk
/// plus the unread rest of the last incoming piece. Fails as soon as the body
/// passes the size limit or its declared size, and (for text) when it is not UTF-8.
/// Only the core service builds one; a backend reads it to its end and stores what
/// it yields.
pub struct UploadBody {
    body: ByteStream,
    limits: UploadLimits,
    /// Set for text uploads.
    utf8: Option<Utf8Check>,
    /// The last incoming piece and how much of it is used.
    piece: Vec<u8>,
    used: usize,
    received: u64,
    /// How many pieces the client has sent so far (see [`UploadBody::pieces_received`]).
    pieces: Arc<AtomicU64>,
    ended: bool,
}

impl UploadBody {
    /// `body` held to `declared` (when given) and to the limits; a text body must be UTF-8.
    pub(super) fn new(body: ByteStream, limits: UploadLimits, is_text: bool, declared: Option<u64>) -> UploadBody {
        UploadBody {
            body: body_of_declared_size(body, declared),
            limits,
            utf8: is_text.then(Utf8Check::default),
            piece: Vec::new(),
            used: 0,
            received: 0,
            pieces: Arc::default(),
            ended: false,
        }
    }

    /// Bytes received so far; after the last chunk, the artifact's size.
    pub fn size(&self) -> u64 {
        self.received
    }

    /// The size of every chunk but the last.
    pub fn chunk_bytes(&self) -> usize {
        self.limits.chunk_bytes
    }

    /// A counter of the pieces the client has sent, readable while the chunks are being
    /// written: a backend that keeps pending data alive while the client sends watches it.
    pub fn pieces_received(&self) -> Arc<AtomicU64> {
        self.pieces.clone()
    }

    /// The next storage chunk; None once the body has ended (and passed every check).
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut chunk = Vec::new();
        while chunk.len() < self.limits.chunk_bytes {
            if self.used == self.piece.len() {
                if !self.read_piece().await? {
                    break;
                }
                continue;
            }
            let take = (self.limits.chunk_bytes - chunk.len()).min(self.piece.len() - self.used);
            if chunk.is_empty() && self.used == 0 && take == self.piece.len() {
                // A whole piece becomes the chunk's start without a copy.
                chunk = std::mem::take(&mut self.piece);
            } else {
                chunk.extend_from_slice(&self.piece[self.used..self.used + take]);
                self.used += take;
            }
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }

    /// Reads the next incoming piece into `piece`; false at the end of the body.
    async fn read_piece(&mut self) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let next = self.body.next().await;
        if next.is_some() {
            self.pieces.fetch_add(1, Ordering::Relaxed);
        }
        let Some(piece) = next.transpose()? else {
            self.ended = true;
            if self.utf8.as_ref().is_some_and(|check| !check.finish()) {
                return Err(not_utf8());
            }
            return Ok(false);
        };
        self.received += piece.len() as u64;
        if self.received > self.limits.max_bytes {
            return Err(too_large(self.limits.max_bytes));
        }
        if self.utf8.as_mut().is_some_and(|check| !check.feed(&piece)) {
            return Err(not_utf8());
        }
        self.piece = piece;
        self.used = 0;
        Ok(true)
    }
}

fn not_utf8() -> AdkError {
    AdkError::invalid_with("chunk", "artifact marked as text is not valid UTF-8")
}

/// Checks that bytes arriving in pieces are UTF-8, without joining the pieces:
/// only a character cut by a piece boundary (at most 3 bytes) is carried over.
#[derive(Default)]
struct Utf8Check {
    /// The start of a character the last piece cut off.
    carry: Vec<u8>,
}

impl Utf8Check {
    /// False once the bytes so far cannot be UTF-8.
    fn feed(&mut self, piece: &[u8]) -> bool {
        let mut rest = piece;
        // Complete the carried character byte by byte (it needs at most 3 more).
        while !self.carry.is_empty() {
            let Some((&byte, tail)) = rest.split_first() else {
                return true;
            };
            self.carry.push(byte);
            rest = tail;
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_none() => {}
                Err(_) => return false,
            }
        }
        match std::str::from_utf8(rest) {
            Ok(_) => true,
            // Only incomplete at the end: the rest may come with the next piece.
            Err(e) if e.error_len().is_none() => {
                self.carry = rest[e.valid_up_to()..].to_vec();
                true
            }
            Err(_) => false,
        }
    }

    /// True when the bytes fed so far are complete UTF-8.
    fn finish(&self) -> bool {
        self.carry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    async fn chunks_of(pieces: Vec<Vec<u8>>, is_text: bool, limits: UploadLimits) -> Result<Vec<Vec<u8>>> {
        let mut upload = UploadBody::new(stream::iter(pieces.into_iter().map(Ok)).boxed(), limits, is_text, None);
        let mut chunks = Vec::new();
        while let Some(chunk) = upload.next_chunk().await? {
            chunks.push(chunk);
        }
        Ok(chunks)
    }

    const LIMITS: UploadLimits = UploadLimits {
        max_bytes: 100,
        chunk_bytes: 4,
    };

    #[tokio::test]
    async fn pieces_are_recut_into_storage_chunks() {
        let pieces = vec![
            b"a".to_vec(),
            b"bcdef".to_vec(),
            vec![],
            b"ghij".to_vec(),
            b"k".to_vec(),
        ];
        let chunks = chunks_of(pieces, false, LIMITS).await.unwrap();
        assert_eq!(chunks, [b"abcd".to_vec(), b"efgh".to_vec(), b"ijk".to_vec()]);
        assert!(chunks_of(vec![], false, LIMITS).await.unwrap().is_empty());
        let exact = chunks_of(vec![b"abcd".to_vec(), b"efgh".to_vec()], false, LIMITS)
            .await
            .unwrap();
        assert_eq!(exact, [b"abcd".to_vec(), b"efgh".to_vec()]);
    }

    #[tokio::test]
    async fn the_size_limit_holds_for_bodies() {
        let limits = UploadLimits {
            max_bytes: 5,
            chunk_bytes: 4,
        };
        assert!(chunks_of(vec![b"abcde".to_vec()], false, limits).await.is_ok());
        let err = chunks_of(vec![b"abc".to_vec(), b"def".to_vec()], false, limits)
            .await
            .unwrap_err();
        assert!(matches!(err, AdkError::ResourceExhausted(..)), "{err:?}");
        assert!(err.to_string().contains("maximum size of 5 bytes"), "{err}");
    }

    #[tokio::test]
    async fn text_must_be_utf8_across_piece_boundaries() {
        let text = "añ€😀z".as_bytes();
        for cut in 0..text.len() {
            let pieces = vec![text[..cut].to_vec(), text[cut..].to_vec()];
            let chunks = chunks_of(pieces, true, LIMITS).await.unwrap();
            assert_eq!(chunks.concat(), text, "cut at {cut}");
        }
        for bad in [
            vec![vec![0xff]],
            vec![b"a".to_vec(), vec![0xe2, 0x82]],
            vec![vec![0xe2], vec![0x41]],
        ] {
            let err = chunks_of(bad.clone(), true, LIMITS).await.unwrap_err();
            assert!(matches!(err, AdkError::InvalidArgument { .. }), "{bad:?}: {err:?}");
            assert!(chunks_of(bad, false, LIMITS).await.is_ok(), "binary needs no UTF-8");
        }
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(piece_size(0), DEFAULT_CHUNK_BYTES);
        assert_eq!(piece_size(10), 10);
        assert_eq!(piece_size(usize::MAX), MAX_CHUNK_BYTES);
        assert_eq!(UploadLimits::new(1, 0).chunk_bytes, DEFAULT_CHUNK_BYTES);
    }
}
