//! [`RedisStore`]: one Redis deployment as a backend uses it. Every Redis-backed store
//! (sessions, artifacts, memories, leases) talks to Redis through it: plain calls, and
//! writes acknowledged once durable (`durability.rs`).

use super::conn::{Conn, Link};
use super::durability::{Durability, ReplicaAcks, marker_key};
use super::error::{REDIS_UNAVAILABLE, decode_reply, store_error};
use adk_grpc_core::{AdkError, Result};
use adk_grpc_telemetry::RedisOp;
use redis::{Arg, Cmd, FromRedisValue, Pipeline, ScriptInvocation, ServerErrorKind, Value};
use std::sync::Arc;
use tracing::Instrument;

/// One Redis deployment as a service uses it: the shared connection, and calls whose
/// failures all go through [`store_error`]. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub(crate) struct RedisStore {
    link: Link,
    /// When a write counts as acknowledged; see `durability.rs`.
    durability: Arc<Durability>,
}

impl RedisStore {
    /// Connects to `url` (see [`Link::open`]); writes are acknowledged as `acks` says.
    pub(crate) async fn connect(url: &str, acks: ReplicaAcks) -> Result<RedisStore> {
        let link = Link::open(url).await?;
        let durability = Arc::new(Durability::new(acks));
        Ok(RedisStore { link, durability })
    }

    pub(crate) fn durability(&self) -> &Durability {
        &self.durability
    }

    pub(crate) fn is_cluster(&self) -> bool {
        self.link.is_cluster()
    }

    /// A handle on the shared connection, for pipelines and calls the helpers below do
    /// not cover. On a cluster it is the connection of the moment: take one per request.
    pub(crate) fn conn(&self) -> Conn {
        self.link.conn()
    }

    // Every round trip of the services goes through `query`, `eval` or `pipeline`,
    // so this is where each gets its span and its latency/error metrics (see
    // `observe`). Spans and metrics name the operation only, never keys or values.

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let op = RedisOp::command(&command_name(cmd));
        let value = observe(op, cmd.query_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Runs a Lua script; `script` names it in spans and metrics (`script:<name>`).
    pub(crate) async fn eval<T: FromRedisValue>(&self, script: &str, invocation: &ScriptInvocation<'_>) -> Result<T> {
        let op = RedisOp::script(script);
        let value = observe(op, invocation.invoke_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Runs a pipeline; on a cluster all of its keys must share one hash tag.
    pub(crate) async fn pipeline<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T> {
        let names: Vec<String> = pipe.cmd_iter().map(command_name).collect();
        let op = RedisOp::pipeline(names.iter().map(String::as_str));
        let value = observe(op, pipe.query_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Ok while Redis answers; any failure is `Unavailable` (a health check asks "can I serve?").
    /// Not observed like the calls above: a health probe every second would start a
    /// trace of its own each time and drown the real ones.
    pub(crate) async fn ping(&self) -> Result<()> {
        let reply = redis::cmd("PING")
            .query_async::<Value>(&mut self.conn())
            .await
            .map_err(store_error);
        reply.map(drop).map_err(|e| match e {
            AdkError::Unavailable(message) => AdkError::Unavailable(message),
            other => {
                tracing::warn!(error = %other, "redis health check failed");
                AdkError::Unavailable(REDIS_UNAVAILABLE.to_string())
            }
        })
    }
}

/// Runs one round trip inside `op`'s span and records its outcome.
async fn observe(op: RedisOp, request: impl Future<Output = redis::RedisResult<Value>>) -> Result<Value> {
    let reply = request.instrument(op.span().clone()).await.map_err(store_error);
    op.finish(reply.as_ref().err().map(AdkError::code));
    reply
}

/// A command's name (its first argument), for spans and metric labels.
fn command_name(cmd: &Cmd) -> String {
    match cmd.args_iter().next() {
        Some(Arg::Simple(name)) => String::from_utf8_lossy(name).into_owned(),
        _ => "UNKNOWN".to_string(),
    }
}

// ---------- durable writes (see `durability.rs`) ----------

impl RedisStore {
    /// Runs a write script like [`RedisStore::eval`] and acknowledges it only once
    /// it is durable (see the module docs). `key` is one of the script's keys.
    pub(crate) async fn durable_eval<T: FromRedisValue>(
        &self,
        script: &str,
        invocation: &ScriptInvocation<'_>,
        key: &str,
    ) -> Result<T> {
        let replicas = self.replicas_required(key).await?;
        self.durable_eval_with(replicas, script, invocation, key).await
    }

    /// [`RedisStore::durable_eval`] for a caller that asked [`RedisStore::replicas_required`]
    /// for `key` already (the append, whose script does more when there is no replica to
    /// wait for): one decision per write.
    pub(crate) async fn durable_eval_with<T: FromRedisValue>(
        &self,
        replicas: u32,
        script: &str,
        invocation: &ScriptInvocation<'_>,
        key: &str,
    ) -> Result<T> {
        let mut conn = self.conn();
        if replicas == 0 {
            return self.eval(script, invocation).await;
        }
        // The marker makes `WAIT` cover what the script read as well as what it wrote: a
        // script that changed nothing (an idempotent retry finding its event, a create
        // finding the session) replicates nothing of its own, and the event it reports
        // must be confirmed on this very node, in this very request, or a failover between
        // two requests could confirm it on a node that never had it.
        let mut pipe = redis::pipe();
        pipe.invoke_script(invocation)
            .cmd("SET")
            .arg(marker_key(key))
            .arg("")
            .arg("PX")
            .arg(1)
            .ignore()
            .add_command(self.durability().wait_cmd(replicas));
        let op = RedisOp::script(script);
        let request = async {
            match pipe.query_async::<Vec<Value>>(&mut conn).await {
                // A node that never ran the script (new, restarted, promoted) does not
                // know it yet; the failed pipeline wrote nothing.
                Err(e) if e.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) => {
                    invocation.load_async(&mut conn).await?;
                    pipe.query_async::<Vec<Value>>(&mut conn).await
                }
                reply => reply,
            }
        };
        let replies = request.instrument(op.span().clone()).await.map_err(store_error);
        op.finish(replies.as_ref().err().map(AdkError::code));
        let [reply, confirmed] = <[Value; 2]>::try_from(replies?)
            .map_err(|_| AdkError::Internal("unexpected pipeline reply from redis".into()))?;
        self.check_confirmed(replicas, confirmed)?;
        decode_reply(reply)
    }

    /// Runs a write pipeline like [`RedisStore::pipeline`] (all keys on one hash tag)
    /// and acknowledges it only once it is durable. `key` is one of its keys.
    pub(crate) async fn durable_pipeline<T: FromRedisValue>(&self, pipe: &Pipeline, key: &str) -> Result<T> {
        let replicas = self.durability().required(&mut self.conn(), key).await?;
        if replicas == 0 {
            return self.pipeline(pipe).await;
        }
        let mut pipe = pipe.clone();
        pipe.add_command(self.durability().wait_cmd(replicas));
        let mut replies: Vec<Value> = self.pipeline(&pipe).await?;
        let confirmed = replies
            .pop()
            .ok_or_else(|| AdkError::Internal("unexpected pipeline reply from redis".into()))?;
        self.check_confirmed(replicas, confirmed)?;
        decode_reply(Value::Array(replies))
    }

    /// Runs `read` (a read of keys on the node owning `key`) and returns its reply only
    /// once everything it saw is durable; `None` when fewer replicas than required
    /// confirmed in time, so a failover could still take some of it back.
    ///
    /// The read, a marker write and `WAIT` go to that node in one pipeline, in this
    /// order: the marker's replication offset is past everything the read saw, so the
    /// replicas that confirm the marker have all of it. This is how a watcher delivers
    /// only events that cannot be lost: it confirms its own reads instead of trusting
    /// each append's `WAIT`, so events whose append failed waiting for replicas (and
    /// may be lost) are held back until a later confirmation covers them.
    /// `replicas` is what [`RedisStore::replicas_required`] said for `key`.
    pub(crate) async fn durable_read<T: FromRedisValue>(
        &self,
        read: &redis::Cmd,
        key: &str,
        replicas: u32,
    ) -> Result<Option<T>> {
        if replicas == 0 {
            return self.query(read).await.map(Some);
        }
        let mut pipe = redis::pipe();
        pipe.add_command(read.clone())
            .cmd("SET")
            .arg(marker_key(key))
            .arg("")
            .arg("PX")
            .arg(1)
            .ignore()
            .add_command(self.durability().wait_cmd(replicas));
        let replies: Vec<Value> = self.pipeline(&pipe).await?;
        let [reply, confirmed] = <[Value; 2]>::try_from(replies)
            .map_err(|_| AdkError::Internal("unexpected pipeline reply from redis".into()))?;
        let confirmed: i64 = decode_reply(confirmed)?;
        if confirmed < i64::from(replicas) {
            return Ok(None);
        }
        decode_reply(reply).map(Some)
    }

    /// How many replicas a write to `key`'s node must reach now (see
    /// [`MinReplicas`](super::durability::MinReplicas)).
    pub(crate) async fn replicas_required(&self, key: &str) -> Result<u32> {
        self.durability().required(&mut self.conn(), key).await
    }

    fn check_confirmed(&self, required: u32, confirmed: Value) -> Result<()> {
        let confirmed: i64 = decode_reply(confirmed)?;
        if confirmed < i64::from(required) {
            return Err(self.durability().not_durable(required, confirmed));
        }
        Ok(())
    }
}
