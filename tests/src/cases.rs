//! Tables of calls and the status each must get, run by one loop that names every
//! row that fails: how the hostile-input and security suites state their cases.

use futures::StreamExt;
use futures::future::BoxFuture;
use std::future::Future;
use tonic::Code;

/// A hostile call whose reply does not matter, only its status.
pub type Call = BoxFuture<'static, Result<(), tonic::Status>>;

/// `call` on a clone of `client`, as a [`Call`].
pub fn on<C: Clone, T, Fut>(client: &C, call: impl FnOnce(C) -> Fut) -> Call
where
    Fut: Future<Output = Result<T, tonic::Status>> + Send + 'static,
{
    let reply = call(client.clone());
    Box::pin(async move { reply.await.map(drop) })
}

/// One row of a table: a call, the code it must get (`Code::Ok`: it must succeed), texts
/// its message must hold (the request's field) and texts it must not (another request's
/// field or advice).
pub struct Case {
    name: String,
    call: Call,
    want: Code,
    names: Vec<&'static str>,
    foreign: Vec<&'static str>,
}

pub fn row(name: impl Into<String>, want: Code, call: Call) -> Case {
    Case {
        name: name.into(),
        call,
        want,
        names: Vec::new(),
        foreign: Vec::new(),
    }
}

impl Case {
    pub fn naming(mut self, names: &[&'static str], foreign: &[&'static str]) -> Case {
        self.names.extend(names);
        self.foreign.extend(foreign);
        self
    }

    /// What is wrong with the reply, if anything.
    async fn failure(self) -> Option<String> {
        let Case {
            name,
            call,
            want,
            names,
            foreign,
        } = self;
        let status = match call.await {
            Ok(()) if want == Code::Ok => return None,
            Ok(()) => return Some(format!("{name}: expected {want:?}, got a reply")),
            Err(status) => status,
        };
        let message = status.message();
        if status.code() != want {
            return Some(format!("{name}: expected {want:?}, got {:?}: {message}", status.code()));
        }
        if let Some(missing) = names.iter().find(|text| !message.contains(**text)) {
            return Some(format!("{name}: {missing:?} not in {message:?}"));
        }
        if let Some(found) = foreign.iter().find(|text| message.contains(**text)) {
            return Some(format!("{name}: {found:?} in {message:?}"));
        }
        None
    }
}

/// Runs every row of `batch` in order and fails naming each row that did not get its
/// status; returns how many rows ran.
pub async fn check(batch: &str, rows: Vec<Case>) -> usize {
    let count = rows.len();
    let mut failures = Vec::new();
    for case in rows {
        failures.extend(case.failure().await);
    }
    assert!(
        failures.is_empty(),
        "{batch}: {} of {count} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    count
}

/// The first status of a server stream: the call's or its first item's.
pub async fn stream_status<T: std::fmt::Debug>(
    call: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
) -> Result<T, tonic::Status> {
    let mut stream = call?.into_inner();
    match stream.next().await {
        Some(item) => item,
        None => Err(tonic::Status::ok("the stream ended without an item or a status")),
    }
}
