//! An incremental parser for `text/event-stream` (server-sent events), as both
//! providers stream their replies in it.
//!
//! Written here rather than taken from a crate because the part we need is small
//! (the WHATWG "interpret an event stream" rules without reconnection) while
//! the usual crate for it pulls in a parser-combinator library; this way the
//! chunk-boundary cases that matter to us are tested right below.
//!
//! Bytes are buffered up to a line end before being decoded, so a UTF-8
//! character or a `\r\n` split across two network chunks is handled.

/// One dispatched event. Only `data` matters to the providers; `event` is kept
/// for error reporting and for servers that name their events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The `event:` field, empty when the server sent none (the spec's "message").
    pub event: String,
    /// The `data:` lines of the event joined with `\n`.
    pub data: String,
}

/// An event grew past the parser's limit (carried): the stream is given up.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct EventTooLong(pub(crate) usize);

#[derive(Debug)]
pub(crate) struct SseParser {
    /// An event longer than this (`--max-model-reply-bytes`) fails the stream rather
    /// than being buffered further: an endless line or event cannot grow memory.
    max_event_bytes: usize,
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` in the next one belongs to it.
    pending_cr: bool,
    /// Whether the first line (which may start with a byte-order mark) has been processed.
    started: bool,
    data: String,
    has_data: bool,
    event: String,
}

impl SseParser {
    /// A parser with the server's limit of one event (`--max-model-reply-bytes`).
    pub(crate) fn new() -> Self {
        SseParser::with_max_event_bytes(adk_grpc_core::replies::max_model_reply_bytes())
    }

    pub(crate) fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        SseParser {
            max_event_bytes,
            line: Vec::new(),
            pending_cr: false,
            started: false,
            data: String::new(),
            has_data: false,
            event: String::new(),
        }
    }

    /// Feeds the next chunk of the body and returns the events it completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLong> {
        let mut events = Vec::new();
        for &byte in chunk {
            let was_cr = std::mem::take(&mut self.pending_cr);
            match byte {
                b'\n' if was_cr => {} // the second half of a `\r\n`
                b'\n' | b'\r' => {
                    self.pending_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.process_line(&line) {
                        events.push(event);
                    }
                }
                _ => {
                    if self.line.len() + self.data.len() >= self.max_event_bytes {
                        return Err(EventTooLong(self.max_event_bytes));
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    /// The body ended. The spec drops an event that was not closed by a blank
    /// line; we dispatch it instead, since the providers' last event is
    /// complete JSON and a lenient end costs nothing (a truncated one still fails
    /// to parse, and a cut connection is reported before this is called).
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty()
            && let Some(event) = self.process_line(&line)
        {
            return Some(event);
        }
        self.dispatch()
    }

    fn process_line(&mut self, mut line: &[u8]) -> Option<SseEvent> {
        if !std::mem::replace(&mut self.started, true) {
            // A byte-order mark may open the stream; it is not part of the first field.
            line = line.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(line);
        }
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None; // a comment, e.g. a keep-alive
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_string(),
            // `id` and `retry` only matter for reconnecting, which a model call never does.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    /// Feeds the input one byte at a time: every chunk boundary is exercised.
    fn bytewise(input: &[u8]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for byte in input {
            events.extend(parser.feed(std::slice::from_ref(byte)).unwrap());
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_end_at_blank_lines() {
        let mut parser = SseParser::new();
        let events = parser.feed(b"data: {\"a\":1}\n\ndata: [DONE]\n\n").unwrap();
        assert_eq!(data(&events), ["{\"a\":1}", "[DONE]"]);
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn all_line_endings_and_any_split() {
        let input = b"data: one\r\n\r\ndata: two\n\ndata: three\r\rdata: four\r\n\r\n";
        assert_eq!(data(&bytewise(input)), ["one", "two", "three", "four"]);
        let mut parser = SseParser::new();
        let mut events = parser.feed(input).unwrap();
        events.extend(parser.finish());
        assert_eq!(data(&events), ["one", "two", "three", "four"]);
    }

    #[test]
    fn multi_line_data_comments_and_fields() {
        let input = b": keep-alive\nevent: delta\nid: 7\nretry: 10\ndata:first\ndata: second\nunknown: x\n\n";
        let events = bytewise(input);
        assert_eq!(
            events,
            [SseEvent {
                event: "delta".into(),
                data: "first\nsecond".into()
            }]
        );
    }

    #[test]
    fn only_one_space_after_the_colon_is_stripped() {
        assert_eq!(data(&bytewise(b"data:  two spaces\n\n")), [" two spaces"]);
        assert_eq!(data(&bytewise(b"data\n\n")), [""]);
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert!(bytewise(b"\n\n: ping\n\nevent: x\n\n").is_empty());
        // ...and the dropped event name does not leak into the next event.
        assert_eq!(bytewise(b"event: x\n\ndata: y\n\n")[0].event, "");
    }

    #[test]
    fn utf8_split_across_chunks_survives() {
        let text = "data: héllo wörld ☃\n\n".as_bytes();
        assert_eq!(data(&bytewise(text)), ["héllo wörld ☃"]);
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        assert_eq!(data(&bytewise(b"\xEF\xBB\xBFdata: x\n\n")), ["x"]);
    }

    #[test]
    fn unterminated_last_event_is_dispatched_at_the_end() {
        assert_eq!(data(&bytewise(b"data: a\n\ndata: tail")), ["a", "tail"]);
        assert_eq!(data(&bytewise(b"data: tail\n")), ["tail"]);
    }

    #[test]
    fn runaway_line_is_an_error() {
        let mut parser = SseParser::with_max_event_bytes(100);
        assert_eq!(parser.feed(&[b'x'; 101]).unwrap_err(), EventTooLong(100));
    }

    #[test]
    fn an_event_of_many_lines_counts_them_all() {
        let mut parser = SseParser::with_max_event_bytes(100);
        assert_eq!(
            data(&parser.feed(&[b"data: ", &[b'x'; 80][..], b"\n\n"].concat()).unwrap()).len(),
            1
        );
        let line = [b"data: ", &[b'x'; 40][..], b"\n"].concat();
        assert!(parser.feed(&line).unwrap().is_empty());
        assert!(parser.feed(&line).unwrap().is_empty());
        assert!(
            parser.feed(&line).is_err(),
            "three 40-byte lines of one event pass 100 bytes"
        );
    }
}
