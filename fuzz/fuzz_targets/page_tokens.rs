//! Arbitrary strings as page tokens of both listings: a decoder may refuse them,
//! never panic, and what it accepts must encode back to a token it accepts again.
#![no_main]

use adk_core::session::{EventCursor, SessionCursor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cursor) = SessionCursor::decode(token) {
        assert_eq!(
            SessionCursor::decode(&cursor.encode()).expect("re-encoded session token"),
            cursor
        );
    }
    if let Ok(cursor) = EventCursor::decode(token) {
        assert_eq!(
            EventCursor::decode(&cursor.encode()).expect("re-encoded event token"),
            cursor
        );
    }
});
