//! Helpers shared by the end-to-end tests and the bench binary: starting the
//! real binaries against a real Redis and connecting real gRPC clients.

use adk_client::RemoteSessionService;
use adk_testkit::{RedisServer, ServiceProcess};

/// A real `adk-session-server` process in front of a real `redis-server`.
pub struct SessionStack {
    pub redis: RedisServer,
    pub server: ServiceProcess,
}

impl SessionStack {
    pub async fn start(extra_args: &[&str]) -> SessionStack {
        let redis = RedisServer::start().await;
        let server = spawn_session_server(&redis.url(), extra_args).await;
        SessionStack { redis, server }
    }

    pub async fn client(&self) -> RemoteSessionService {
        connect(&self.server).await
    }
}

pub async fn spawn_session_server(store_url: &str, extra_args: &[&str]) -> ServiceProcess {
    let mut args = vec!["--store-url".to_string(), store_url.to_string()];
    args.extend(extra_args.iter().map(|a| a.to_string()));
    ServiceProcess::spawn("adk-session-server", &args, &[]).await
}

pub async fn connect(server: &ServiceProcess) -> RemoteSessionService {
    RemoteSessionService::connect(server.endpoint())
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", server.endpoint(), server.tail_log(30)))
}
