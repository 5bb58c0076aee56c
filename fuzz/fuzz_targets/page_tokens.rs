//! Arbitrary strings as page tokens of both listings: a decoder may refuse them,
//! never panic, and what it accepts must encode back to a token it accepts again.
#![no_main]

use adk_grpc_core::session::{EventCursor, SessionCursor};
use adk_grpc_core::{ListEventsRequest, ListRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    for user_id in [Some("u".to_string()), None] {
        let listing = ListRequest {
            app_name: "a".into(),
            user_id,
            ..Default::default()
        };
        if let Ok(cursor) = SessionCursor::decode(token, &listing) {
            assert_eq!(
                SessionCursor::decode(&cursor.encode(&listing), &listing).expect("re-encoded session token"),
                cursor
            );
        }
    }
    let log = ListEventsRequest {
        app_name: "a".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        ..Default::default()
    };
    if let Ok(cursor) = EventCursor::decode(token, &log) {
        assert_eq!(
            EventCursor::decode(&cursor.encode(&log), &log).expect("re-encoded event token"),
            cursor
        );
    }
});
