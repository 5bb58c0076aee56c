//! An agent's whole run bounded in time (ADK's `timeout` of a node): past the
//! deadline its stream is dropped (a model request in flight with it) and the run
//! fails `DEADLINE_EXCEEDED`, naming the agent; what it stored before stays.

use adk_grpc_core::{AdkError, Agent, EventStream, InvocationContext, Result, TransferScope};
use async_stream::try_stream;
use async_trait::async_trait;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// `agent` whose every run must end within `timeout` of its start: everything its
/// run streams counts, an agent it transfers to in that run included.
pub fn with_timeout(agent: Arc<dyn Agent>, timeout: Duration) -> Arc<dyn Agent> {
    Arc::new(TimedAgent { inner: agent, timeout })
}

struct TimedAgent {
    inner: Arc<dyn Agent>,
    timeout: Duration,
}

impl TimedAgent {
    fn expired(name: &str, timeout: Duration) -> AdkError {
        AdkError::DeadlineExceeded(format!(
            "agent {name} did not finish within its timeout of {}s, and was stopped",
            timeout.as_secs_f64()
        ))
    }
}

#[async_trait]
impl Agent for TimedAgent {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        self.inner.sub_agents()
    }
    fn transfer_scope(&self) -> Option<TransferScope> {
        self.inner.transfer_scope()
    }
    fn mode(&self) -> adk_grpc_core::AgentMode {
        self.inner.mode()
    }
    fn spec(&self) -> adk_grpc_core::AgentSpec<'_> {
        self.inner.spec()
    }
    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let (name, timeout) = (self.inner.name().to_string(), self.timeout);
        let deadline = Instant::now() + timeout;
        let mut events = timeout_at(deadline, self.inner.run(ctx))
            .await
            .map_err(|_| Self::expired(&name, timeout))??;
        Ok(Box::pin(try_stream! {
            loop {
                match timeout_at(deadline, events.next()).await {
                    Ok(Some(event)) => yield event?,
                    Ok(None) => break,
                    Err(_) => Err(Self::expired(&name, timeout))?,
                }
            }
        }))
    }
}
