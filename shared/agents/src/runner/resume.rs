//! Resumable invocations (`docs/semantics.md`, Runner 27-28): when the replica running
//! an invocation dies (its lease lapses) or shuts down (it hands the lease over), another
//! replica claims the run from the lease store and goes on from the last stored event.
//!
//! Everything a run did is in the log: each complete model reply, tool call and tool
//! response is an event. So a resumed invocation is the same invocation (same id) whose
//! agents start from its stored events: the agent that was running (the last author of
//! the invocation, or the target of a transfer it stored) runs again and builds its next
//! model request from them, so no model call whose reply is stored is made again and no
//! tool call whose response is stored runs again. Calls stored without their responses
//! are answered first (`llm::flow`: re-run only when the tool is safe to repeat).
//!
//! Workflow agents store their position (sequence step, loop iteration, finished
//! parallel branches) as state events (`workflow`; read back in `run_state`): a resumed
//! invocation whose running agent is below a workflow agent that has not finished starts
//! the outermost such workflow agent again, which goes on from its position. Trees with agents of other
//! kinds (custom `Agent`s, whose position the runner cannot know) are not resumable:
//! the next run closes their invocation as interrupted.

use super::lease::LeaseGuard;
use super::session::has_function_responses;
use super::{Runner, Started};
use crate::context::{AgentContext, Invocation, InvocationParts, session_artifacts};
use crate::llm::task;
use crate::rules::USER_AUTHOR;
use crate::run_state::{open_workflow, run_invocations, transfer_not_acted_on, unfinished};
use adk_grpc_core::sync;
use adk_grpc_core::{
    AdkError, Agent, ClaimedRun, Content, Event, EventStream, InvocationContext, Result, RunConfig, RunLog, Session,
    SessionLease, StreamingMode, find_agent,
};
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// What a resumed run needs besides the log, kept in its run record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct ResumeOptions {
    streaming: bool,
    max_llm_calls: u32,
    /// A record written before the setting existed resumes with it off, ADK's default.
    #[serde(default)]
    include_thoughts_from_other_agents: bool,
    /// The run's `temp:` state (the store keeps no `temp:` key).
    #[serde(default)]
    temp: HashMap<String, Value>,
}

impl ResumeOptions {
    pub(super) fn of(run_config: &RunConfig, delta: &HashMap<String, Value>) -> Self {
        ResumeOptions {
            streaming: run_config.streaming_mode == StreamingMode::Sse,
            max_llm_calls: run_config.max_llm_calls,
            include_thoughts_from_other_agents: run_config.include_thoughts_from_other_agents,
            temp: delta
                .iter()
                .filter(|(key, _)| key.starts_with("temp:"))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        }
    }

    pub(super) fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A record written by another version of the runner, or damaged, resumes with the defaults.
    fn decode(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "a run record's options do not parse; resuming with the defaults");
            ResumeOptions::of(&RunConfig::default(), &HashMap::new())
        })
    }

    fn run_config(&self) -> RunConfig {
        RunConfig {
            streaming_mode: if self.streaming {
                StreamingMode::Sse
            } else {
                StreamingMode::None
            },
            max_llm_calls: self.max_llm_calls,
            include_thoughts_from_other_agents: self.include_thoughts_from_other_agents,
        }
    }
}

/// Whether every agent of the tree is an LLM or a workflow agent, whose whole position is in the log.
pub(super) fn resumable_tree(agent: &Arc<dyn Agent>) -> bool {
    agent.spec().kind.resumable() && agent.sub_agents().iter().all(resumable_tree)
}

impl Runner {
    /// Whether another replica can resume this runner's invocations (its tree is all LLM agents).
    pub fn is_resumable(&self) -> bool {
        self.resumable
    }

    /// Resumes a run this replica claimed ([`SessionLease::claim_lapsed`]) and streams
    /// what its agents do from here on (the events stored before are in the log). None
    /// when there is nothing left to do (the run had finished, or stored nothing): the
    /// lease is given back.
    pub async fn resume(&self, claimed: ClaimedRun) -> Result<Option<EventStream>> {
        let record = &claimed.record;
        let (user_id, session_id) = (record.key.user_id.clone(), record.key.session_id.clone());
        let invocation_id = record.invocation_id.clone();
        let lost_at = Instant::now().checked_sub(claimed.lapsed_for);
        let lease = LeaseGuard::claimed(self.lease.clone(), record.key.clone(), &claimed.owner, self.lease_ttl);
        let observed = adk_grpc_telemetry::Invocation::start(&self.app_name, &user_id, &session_id, &invocation_id);
        let span = observed.span().clone();
        let options = ResumeOptions::decode(&record.options);
        let started = self
            .restart(&invocation_id, &user_id, &session_id, options)
            .instrument(span)
            .await;
        let (invocation, events) = match started {
            Ok(Some(started)) => started,
            Ok(None) => {
                lease.release().await;
                observed.finish(None);
                return Ok(None);
            }
            Err(e) => {
                lease.release().await;
                observed.finish(Some(e.code()));
                return Err(e);
            }
        };
        tracing::info!(%invocation_id, session_id, lapsed_for = ?claimed.lapsed_for, "resumed an invocation");
        let started = Started {
            invocation_id,
            user_id,
            session_id,
            lease,
            invocation,
            observed,
            events,
        };
        Ok(Some(self.drive(started, self.memory_to_add_to(), lost_at)))
    }

    /// Rebuilds the invocation from the log and starts the agent that was running.
    async fn restart(
        &self,
        invocation_id: &str,
        user_id: &str,
        session_id: &str,
        options: ResumeOptions,
    ) -> Result<Option<(Arc<Invocation>, EventStream)>> {
        // The whole log: the invocation's first events may be older than any window.
        let session = self.load_session(user_id, session_id, false, false).await?;
        let session = self.with_run_marks(session).await?;
        // Positions count from the invocation a client-tool answer continues, too.
        let log = RunLog::new(session.events.as_slice().to_vec());
        // The Run's own events: of a task's later turn (which goes on with the task's
        // invocation), those from its message on.
        let own = log.run_events(invocation_id);
        let Some(user_event) = own
            .first()
            .map(|&at| log.at(at))
            .filter(|event| event.author == USER_AUTHOR)
        else {
            // Its runner died before it stored the user's message: nothing was asked.
            return Ok(None);
        };
        let user_content = user_event.content().cloned().unwrap_or_default();
        let steps = own.len() - 1;
        let last_step = own
            .last()
            .map(|&at| log.at(at))
            .filter(|event| event.author != USER_AUTHOR);
        let Some((agent, branch)) = self.agent_to_resume(&session, &log, invocation_id, &user_content, last_step)?
        else {
            return Ok(None);
        };
        adk_grpc_telemetry::metrics::run_resumed(&self.app_name, steps);
        let artifacts = self
            .artifact_service
            .clone()
            .map(|service| session_artifacts(service, &session));
        let run_config = options.run_config();
        let memory = self
            .memory_service
            .clone()
            .map(|service| super::memory::scoped(service, &session));
        let invocation = Arc::new(Invocation::new(InvocationParts {
            invocation_id: invocation_id.to_string(),
            root_agent: self.root_agent.clone(),
            session,
            log,
            user_content,
            overlay: options.temp,
            run_config,
            artifacts,
            compaction: self.compaction.clone(),
            memory,
            positions: self.positions,
        }));
        let ctx: Arc<dyn InvocationContext> = Arc::new(AgentContext::new(invocation.clone(), agent.clone(), branch));
        let events = agent.run(ctx).await?;
        Ok(Some((invocation, events)))
    }

    /// The agent a resumed Run goes on with, on its branch: the one that made its last
    /// step (a transfer's target not run yet), else the one its message went to, or the
    /// workflow agent above it that has not finished; None when the Run had ended.
    fn agent_to_resume(
        &self,
        session: &Session,
        log: &RunLog,
        invocation_id: &str,
        user_content: &Content,
        last_step: Option<&Event>,
    ) -> Result<Option<(Arc<dyn Agent>, String)>> {
        let run = run_invocations(&self.root_agent, log, invocation_id);
        // A workflow agent above the running agent goes on from its position, but for a
        // client's answer in an app not marked resumable, which its agent answers alone
        // (as the Run started, Runner::start).
        let workflow_goes_on = self.answers_go_on_with_workflows() || !has_function_responses(user_content);
        let open_workflow = |agent: &Arc<dyn Agent>| {
            workflow_goes_on
                .then(|| open_workflow(&self.root_agent, log, &run, agent))
                .flatten()
        };
        let Some(last) = last_step else {
            let (caller, branch) = self.agent_for(session, log, user_content)?;
            return Ok(Some(open_workflow(&caller).unwrap_or((caller, branch))));
        };
        // A task's transfer to a chat peer (or the peer's run) goes on through the task's
        // caller, whose flow runs the peer and answers the call.
        if unfinished(log, invocation_id)
            && let Some(caller) = task::peer_transfer_to_resume(&self.root_agent, log, &last.branch)
        {
            return Ok(Some(caller));
        }
        // A transfer stored and not acted on yet goes on with its target.
        let name = transfer_not_acted_on(log, invocation_id).unwrap_or(&last.author);
        let agent = find_agent(&self.root_agent, name).ok_or_else(|| {
            AdkError::FailedPrecondition(format!(
                "agent {name}, which was running invocation {invocation_id}, is not part of this runner's agents"
            ))
        })?;
        // A workflow agent above it that has not finished goes on from its position.
        Ok(match open_workflow(&agent) {
            Some(open) => Some(open),
            None if unfinished(log, invocation_id) => {
                Some((agent, task::transfer_goes_on_from(&self.root_agent, log, &last.branch)))
            }
            None => None,
        })
    }

    /// Stops taking new runs: [`Runner::start_run`] is `UNAVAILABLE` from now on (a
    /// replica shutting down; the client runs again on another). A resumable run starts
    /// no new step either: it is handed over once the step in flight is stored.
    pub fn stop_taking_runs(&self) {
        self.draining.cancel();
    }

    /// How many invocations run here now.
    pub fn running(&self) -> usize {
        sync::lock(&self.running).len()
    }

    /// Stops every invocation running here and hands its lease over to another replica,
    /// which resumes it at once (a replica shutting down after its grace period).
    pub fn hand_over_all(&self) -> usize {
        let running = sync::lock(&self.running);
        for invocation in running.values() {
            invocation.handover.cancel();
        }
        running.len()
    }
}

/// Scans the lease store for runs of its runners' apps whose runner died or handed them
/// over, claims them and resumes them here, each driven to its end by a task of its own
/// (its events are stored; clients follow them with WatchSession).
pub struct Resumer {
    runners: HashMap<String, Arc<Runner>>,
    lease: Arc<dyn SessionLease>,
    ttl: Duration,
}

impl Resumer {
    /// Claims at most this many runs per scan (the next scan takes the rest).
    const CLAIMS_PER_SCAN: usize = 8;

    /// A resumer for the resumable ones of `runners` (which share one lease store); None
    /// when none is resumable.
    pub fn new(runners: impl IntoIterator<Item = Arc<Runner>>) -> Option<Resumer> {
        let runners: HashMap<String, Arc<Runner>> = runners
            .into_iter()
            .filter(|runner| runner.is_resumable())
            .map(|runner| (runner.app_name.clone(), runner))
            .collect();
        let first = runners.values().next()?;
        let (lease, ttl) = (first.lease.clone(), first.lease_ttl);
        Some(Resumer { runners, lease, ttl })
    }

    /// How long between scans: a fraction of the lease TTL (so a run is resumed within
    /// about one TTL and this after its runner died), at most 1 s, jittered so that
    /// replicas do not scan in step.
    fn pause(&self) -> Duration {
        let base = (self.ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u32;
        base / 2 + base * jitter / 2000
    }

    /// Claims the runs due now and starts them; how many it started.
    pub async fn scan(&self) -> Result<usize> {
        let apps: Vec<String> = self.runners.keys().cloned().collect();
        let claimed = self.lease.claim_lapsed(&apps, self.ttl, Self::CLAIMS_PER_SCAN).await?;
        let mut started = 0;
        for claim in claimed {
            let Some(runner) = self.runners.get(&claim.record.key.app_name) else {
                continue;
            };
            let invocation_id = claim.record.invocation_id.clone();
            match runner.resume(claim).await {
                Ok(Some(events)) => {
                    started += 1;
                    tokio::spawn(drain(events, invocation_id));
                }
                Ok(None) => tracing::debug!(%invocation_id, "a claimed run had nothing left to do"),
                Err(e) => tracing::warn!(%invocation_id, error = %e, "could not resume an invocation"),
            }
        }
        Ok(started)
    }

    /// Scans until `stop` completes (the replica shuts down).
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.pause()) => {}
            }
            if let Err(e) = self.scan().await {
                tracing::warn!(error = %e, "could not scan for runs to resume; trying again");
            }
        }
    }
}

/// Drives a resumed invocation to its end (nobody is streaming it: every event is stored).
async fn drain(mut events: EventStream, invocation_id: String) {
    while let Some(event) = events.next().await {
        if let Err(e) = event {
            tracing::info!(%invocation_id, error = %e, "a resumed invocation ended with an error");
            return;
        }
    }
    tracing::debug!(%invocation_id, "a resumed invocation finished");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_run_keeps_its_run_config_and_an_older_record_resumes_with_the_defaults() {
        let run_config = RunConfig {
            streaming_mode: StreamingMode::Sse,
            max_llm_calls: 7,
            include_thoughts_from_other_agents: true,
        };
        let temp = HashMap::from([
            ("temp:x".to_string(), Value::from(1)),
            ("kept".to_string(), Value::from(2)),
        ]);
        let options = ResumeOptions::decode(&ResumeOptions::of(&run_config, &temp).encode());
        assert_eq!(options.run_config(), run_config);
        assert_eq!(options.temp.keys().collect::<Vec<_>>(), ["temp:x"]);
        let older = ResumeOptions::decode(r#"{"streaming":false,"max_llm_calls":9}"#);
        assert!(!older.run_config().include_thoughts_from_other_agents);
        assert_eq!(older.run_config().max_llm_calls, 9);
    }
}
