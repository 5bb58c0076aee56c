//! Concurrent streams and runs per user and per connection (quota.rs): the call past a
//! limit fails with RESOURCE_EXHAUSTED naming the flag before its handler runs, other
//! users are unaffected, and a slot is freed when its client goes away.

use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::agent_runner_server::{AgentRunner, AgentRunnerServer};
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_proto::v1::session_service_server::{SessionService, SessionServiceServer};
use adk_grpc_server_kit::{GrpcArgs, GrpcServer, LimitArgs, Shutdown};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_stream::Stream;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status, Streaming};

type Events = Pin<Box<dyn Stream<Item = Result<pb::Event, Status>> + Send>>;

/// Streams that stay open until the client leaves; counts the calls its handlers saw.
#[derive(Clone, Default)]
struct Open {
    calls: Arc<AtomicUsize>,
}

impl Open {
    fn events(&self) -> Result<Response<Events>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}

fn unused<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl SessionService for Open {
    async fn create_session(&self, _: Request<pb::CreateSessionRequest>) -> Result<Response<pb::Session>, Status> {
        unused()
    }
    async fn get_session(&self, _: Request<pb::GetSessionRequest>) -> Result<Response<pb::Session>, Status> {
        unused()
    }
    async fn list_sessions(
        &self,
        _: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        unused()
    }
    async fn delete_session(
        &self,
        _: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        unused()
    }
    async fn append_event(&self, _: Request<pb::AppendEventRequest>) -> Result<Response<pb::Event>, Status> {
        unused()
    }
    async fn list_events(&self, _: Request<pb::ListEventsRequest>) -> Result<Response<pb::ListEventsResponse>, Status> {
        unused()
    }
    type WatchSessionStream = Events;
    async fn watch_session(&self, _: Request<pb::WatchSessionRequest>) -> Result<Response<Events>, Status> {
        self.events()
    }
    async fn get_user_state(
        &self,
        _: Request<pb::GetUserStateRequest>,
    ) -> Result<Response<pb::GetUserStateResponse>, Status> {
        unused()
    }
    async fn get_app_state(
        &self,
        _: Request<pb::GetAppStateRequest>,
    ) -> Result<Response<pb::GetAppStateResponse>, Status> {
        unused()
    }
    async fn update_app_state(
        &self,
        _: Request<pb::UpdateAppStateRequest>,
    ) -> Result<Response<pb::UpdateAppStateResponse>, Status> {
        unused()
    }
    async fn fork_session(&self, _: Request<pb::ForkSessionRequest>) -> Result<Response<pb::Session>, Status> {
        unused()
    }
}

#[tonic::async_trait]
impl AgentRunner for Open {
    type RunStream = Events;
    async fn run(&self, _: Request<pb::RunRequest>) -> Result<Response<Events>, Status> {
        self.events()
    }
    async fn list_apps(&self, _: Request<pb::ListAppsRequest>) -> Result<Response<pb::ListAppsResponse>, Status> {
        unused()
    }
    async fn get_app(&self, _: Request<pb::GetAppRequest>) -> Result<Response<pb::App>, Status> {
        unused()
    }
    async fn cancel(&self, _: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        unused()
    }
    async fn rewind(&self, _: Request<pb::RewindRequest>) -> Result<Response<pb::Event>, Status> {
        unused()
    }
}

struct Served {
    endpoint: String,
    watches: Open,
    runs: Open,
    shutdown: Shutdown,
}

async fn serve(limits: LimitArgs) -> Served {
    let grpc = GrpcArgs {
        limits,
        ..GrpcArgs::default()
    };
    let shutdown = Shutdown::new();
    let (watches, runs) = (Open::default(), Open::default());
    let bound = GrpcServer::new(&grpc, shutdown.clone())
        .add_service(SessionServiceServer::new(watches.clone()))
        .add_service(AgentRunnerServer::new(runs.clone()))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let endpoint = format!("http://{}", bound.local_addr());
    tokio::spawn(bound.serve());
    Served {
        endpoint,
        watches,
        runs,
        shutdown,
    }
}

async fn channel(served: &Served) -> Channel {
    Channel::from_shared(served.endpoint.clone())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn watch(channel: &Channel, user: &str) -> Result<Streaming<pb::Event>, Status> {
    SessionServiceClient::new(channel.clone())
        .watch_session(pb::WatchSessionRequest {
            app_name: "support".into(),
            user_id: user.into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .map(Response::into_inner)
}

async fn run(channel: &Channel, user: &str) -> Result<Streaming<pb::Event>, Status> {
    AgentRunnerClient::new(channel.clone())
        .run(pb::RunRequest {
            app_name: "support".into(),
            user_id: user.into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .map(Response::into_inner)
}

fn assert_exhausted(result: Result<Streaming<pb::Event>, Status>, expected: &str) {
    match result {
        Ok(_) => panic!("opened past the limit; expected {expected:?}"),
        Err(status) => {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            assert_eq!(status.message(), expected);
        }
    }
}

/// Retries `open` until the server has seen an earlier stream go (its body dropped).
async fn eventually<F, Fut>(mut open: F) -> Streaming<pb::Event>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Streaming<pb::Event>, Status>>,
{
    let attempt = || {
        let opened = open();
        async move {
            opened
                .await
                .map_err(|status| format!("the slot was never freed: {status:?}"))
        }
    };
    adk_grpc_testkit::eventually(Duration::from_secs(5), attempt).await
}

#[tokio::test]
async fn streams_per_user_are_limited_and_freed_when_the_client_leaves() {
    let served = serve(LimitArgs {
        max_streams_per_user: 3,
        ..LimitArgs::default()
    })
    .await;
    let channel = channel(&served).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(watch(&channel, "alice").await.expect("a stream under the limit"));
    }
    assert_exhausted(
        watch(&channel, "alice").await,
        "too many concurrent streams for user alice (--max-streams-per-user 3)",
    );
    assert_eq!(
        served.watches.calls.load(Ordering::SeqCst),
        3,
        "the refused call reached no handler"
    );
    // Another user, on the same connection, is unaffected.
    let bob = watch(&channel, "bob").await.expect("bob's stream");
    // A stream the client drops frees its slot.
    open.pop();
    open.push(eventually(|| watch(&channel, "alice")).await);
    assert_exhausted(
        watch(&channel, "alice").await,
        "too many concurrent streams for user alice (--max-streams-per-user 3)",
    );
    drop(bob);
    served.shutdown.trigger();
}

#[tokio::test]
async fn runs_per_user_and_per_connection_are_limited_and_the_refused_run_reaches_no_handler() {
    let served = serve(LimitArgs {
        max_runs_per_user: 2,
        max_runs_per_connection: 3,
        ..LimitArgs::default()
    })
    .await;
    let channel = channel(&served).await;
    let mut alice = vec![
        run(&channel, "alice").await.expect("run 1"),
        run(&channel, "alice").await.expect("run 2"),
    ];
    assert_exhausted(
        run(&channel, "alice").await,
        "too many concurrent runs for user alice (--max-runs-per-user 2)",
    );
    assert_eq!(
        served.runs.calls.load(Ordering::SeqCst),
        2,
        "the refused run reached no handler"
    );
    // Runs and streams are counted apart: alice may still watch.
    let _watch = watch(&channel, "alice").await.expect("a watch beside the runs");

    let _bob = run(&channel, "bob").await.expect("bob's run");
    // The connection now holds 3 runs: bob's second run is refused on it, not on another one.
    assert_exhausted(
        run(&channel, "bob").await,
        "too many concurrent runs on this connection (--max-runs-per-connection 3)",
    );
    let other = self::channel(&served).await;
    let _bob_elsewhere = run(&other, "bob").await.expect("bob's run on another connection");
    assert_eq!(served.runs.calls.load(Ordering::SeqCst), 4);

    alice.pop();
    alice.push(eventually(|| run(&channel, "alice")).await);
    assert_eq!(served.runs.calls.load(Ordering::SeqCst), 5);
    served.shutdown.trigger();
}

/// Watches of every user together are limited server-wide (bounding the server's memory
/// and fan-out work): the watch past `--max-watches` fails whoever asks, reaches no
/// handler, and a watch that ends frees its slot. Uploads and downloads are not watches.
#[tokio::test]
async fn watches_are_limited_server_wide_across_users() {
    let served = serve(LimitArgs {
        max_watches: 3,
        ..LimitArgs::default()
    })
    .await;
    let channel = channel(&served).await;
    let mut open = Vec::new();
    for user in ["alice", "bob", "carol"] {
        open.push(watch(&channel, user).await.expect("a watch under the limit"));
    }
    let full = "this server has the most WatchSession streams it serves open (3, --max-watches / ADK_MAX_WATCHES); \
                try again later";
    assert_exhausted(watch(&channel, "dave").await, full);
    // Another connection gets the same answer: the limit is the server's.
    let other = self::channel(&served).await;
    assert_exhausted(watch(&other, "erin").await, full);
    assert_eq!(
        served.watches.calls.load(Ordering::SeqCst),
        3,
        "the refused watches reached no handler"
    );
    // Runs are not watches.
    let _run = run(&channel, "dave").await.expect("a run beside the watches");
    open.pop();
    open.push(eventually(|| watch(&other, "dave")).await);
    assert_exhausted(watch(&channel, "frank").await, full);
    served.shutdown.trigger();
}

/// Runs of every user and connection together are limited per server: one more is
/// refused with a RetryInfo (another replica, or this one later, takes it), and a
/// finished run frees its slot.
#[tokio::test]
async fn runs_are_limited_per_server_with_a_retry_delay() {
    let served = serve(LimitArgs {
        max_runs: 2,
        ..LimitArgs::default()
    })
    .await;
    let channel = channel(&served).await;
    let other = self::channel(&served).await;
    let mut open = vec![
        run(&channel, "alice").await.expect("run 1"),
        run(&other, "bob").await.expect("run 2"),
    ];
    let refused = run(&other, "carol").await.expect_err("a third run on a server of two");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        refused.message(),
        "this server runs the most concurrent runs it takes (2, --max-runs / ADK_MAX_RUNS); try again later"
    );
    let retry = adk_grpc_core::AdkError::from(refused).retry_delay();
    assert!(retry.is_some_and(|d| !d.is_zero()), "a RetryInfo: {retry:?}");
    assert_eq!(
        served.runs.calls.load(Ordering::SeqCst),
        2,
        "the refused run reached no handler"
    );
    open.pop();
    open.push(eventually(|| run(&other, "carol")).await);
    served.shutdown.trigger();
}
