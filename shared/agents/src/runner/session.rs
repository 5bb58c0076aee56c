//! What the runner reads from and writes to the invocation's session: the session
//! loaded for a turn (created if asked), every append fenced with the lease, the
//! close of an invocation a crash cut short, and the agent a function response
//! goes back to.

use super::Runner;
use super::lease::LeaseGuard;
use crate::context::Positions;
use crate::llm::task;
use crate::rules::USER_AUTHOR;
use adk_grpc_core::session::recent::RecentRequest;
use adk_grpc_core::{
    AdkError, Agent, AgentKind, AppendEventRequest, Content, CreateRequest, Event, Events, GetRequest, PartKind,
    Precondition, Result, RunLog, RunMark, RunMarksRequest, Session, SessionService, find_agent, history,
    transfer_targets, transferable_across_tree,
};
use std::sync::Arc;

impl Runner {
    /// The session with the events a turn needs: with `window`, from the latest
    /// compaction on (an O(returned) read, however long the log), else all of them.
    pub(super) async fn load_session(
        &self,
        user_id: &str,
        session_id: &str,
        create: bool,
        window: bool,
    ) -> Result<Session> {
        let get = self.session_read(user_id, session_id, window);
        match self.session_service.get(get.clone()).await {
            Err(AdkError::NotFound(..)) if create => self.create_session(get).await,
            loaded => loaded,
        }
    }

    /// The read of a turn's session: with `window`, from the latest compaction on.
    fn session_read(&self, user_id: &str, session_id: &str, window: bool) -> GetRequest {
        GetRequest {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            since_compaction: window,
            ..Default::default()
        }
    }

    /// `session` with the positions its app keeps beside the log (run marks) put back
    /// where they were written: the log as a resumed or continued run reads it, the same
    /// as an app marked resumable stores it. Unchanged for an app that keeps none there.
    pub(super) async fn with_run_marks(&self, mut session: Session) -> Result<Session> {
        if self.positions != Positions::BesideLog {
            return Ok(session);
        }
        let marks = self
            .session_service
            .run_marks(RunMarksRequest {
                app_name: session.app_name.clone(),
                user_id: session.user_id.clone(),
                session_id: session.id.clone(),
            })
            .await?;
        if !marks.is_empty() {
            let events = std::mem::take(&mut session.events).into_vec();
            session.events = Events::new(RunMark::merge(events, marks));
        }
        Ok(session)
    }

    /// Creates the session `get` names; when another call created it meanwhile, reads theirs.
    async fn create_session(&self, get: GetRequest) -> Result<Session> {
        let create = CreateRequest {
            app_name: get.app_name.clone(),
            user_id: get.user_id.clone(),
            session_id: Some(get.session_id.clone()),
            ..Default::default()
        };
        match self.session_service.create(create).await {
            Err(AdkError::AlreadyExists(..)) => self.session_service.get(get).await,
            created => created,
        }
    }

    /// The session a turn answering `content` starts from. With compaction, the
    /// events from the latest compaction on (all of them for a message answering
    /// function calls, which may be older). Without, the newest events as far as the
    /// model's context budget allows, and back to the calls `content` answers, however
    /// old: never the whole log of a long session. Older events left out are logged and
    /// counted; what was read is made to stand alone ([`history::standalone_suffix`]).
    pub(super) async fn load_turn(
        &self,
        user_id: &str,
        session_id: &str,
        create: bool,
        content: &Content,
        invocation_id: &str,
    ) -> Result<Session> {
        // A task's call made before what a turn reads decides which agent has the conversation.
        let tasks = task::has_task_agent(&self.root_agent);
        if self.compaction.is_some() {
            let window = !has_function_responses(content);
            let session = self.load_session(user_id, session_id, create, window).await?;
            if window && tasks && !task::calls_missing_from(session.events.as_slice()).is_empty() {
                return self.load_session(user_id, session_id, create, false).await;
            }
            return Ok(session);
        }
        let mut recent = RecentRequest {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            budget_tokens: self.context_budget_tokens,
            function_call_ids: history::answered_call_ids(content),
        };
        let mut read = match self.session_service.get_recent(recent.clone()).await {
            // Not there: created at once (the read just said so; no second read first).
            Err(AdkError::NotFound(..)) if create => {
                return self.create_session(self.session_read(user_id, session_id, true)).await;
            }
            read => read?,
        };
        if read.left_out > 0 && tasks {
            let missing = task::calls_missing_from(read.session.events.as_slice());
            if !missing.is_empty() {
                recent.function_call_ids.extend(missing);
                read = self.session_service.get_recent(recent).await?;
            }
        }
        let mut session = read.session;
        if read.left_out > 0 {
            let (events, dropped) = history::standalone_suffix(std::mem::take(&mut session.events).into_vec());
            session.events = Events::new(events);
            let left_out = read.left_out + dropped as u64;
            tracing::info!(
                invocation_id,
                session_id,
                left_out,
                budget_tokens = self.context_budget_tokens,
                "the session's older events were left out of the turn: it reads the newest ones as far as the \
                 model's context budget allows"
            );
            adk_grpc_telemetry::metrics::history_left_out(&self.app_name);
        }
        Ok(session)
    }

    /// Closes an invocation whose runner died mid-run (its lease ran out unreleased)
    /// with an `interrupted` event in the agent's name, when the log ends with it: the
    /// next model request then sees the agent's turn end instead of two user turns
    /// in a row. `session` is updated with the stored event.
    pub(super) async fn close_interrupted(
        &self,
        session: &mut Session,
        interrupted: &str,
        lease: &LeaseGuard,
    ) -> Result<()> {
        let Some(last) = session.events.as_slice().last() else {
            return Ok(());
        };
        if last.invocation_id != interrupted || last.interrupted() {
            return Ok(());
        }
        let author = session
            .events
            .iter()
            .rev()
            .take_while(|event| event.invocation_id == interrupted)
            .find(|event| event.author != USER_AUTHOR && find_agent(&self.root_agent, &event.author).is_some())
            .map_or_else(|| self.root_agent.name().to_string(), |event| event.author.clone());
        let closing = Event::interrupted_by_crash(interrupted, &author);
        let stored = append(self.session_service.as_ref(), session, closing, lease.fence()).await?;
        tracing::info!(invocation_id = %interrupted, session_id = %session.id, "closed an invocation interrupted by a runner crash");
        let mut events = std::mem::take(&mut session.events).into_vec();
        events.push(stored);
        session.events = adk_grpc_core::Events::new(events);
        Ok(())
    }

    /// For a message answering function calls, the agent that made them, on the
    /// branch it made them on; for any other, the agent that has the conversation.
    /// While a task agent is open (ADK 2's `mode: task`), the agent that called it: its
    /// flow runs the task agent again (see `llm::task`).
    pub(super) fn agent_for(
        &self,
        session: &Session,
        log: &RunLog,
        content: &Content,
    ) -> Result<(Arc<dyn Agent>, String)> {
        let caller = caller_of(self.answer_rules, log, &session.id, content)?;
        let in_task = caller
            .as_ref()
            .is_none_or(|(_, branch)| !task::scope(branch).is_empty());
        if in_task && let Some(route) = task::route(&self.root_agent, log) {
            return Ok((route.caller, route.caller_branch));
        }
        let Some((author, branch)) = caller else {
            return Ok((agent_to_continue(&self.root_agent, log), String::new()));
        };
        let agent = find_agent(&self.root_agent, &author).ok_or_else(|| {
            AdkError::FailedPrecondition(format!(
                "agent {author}, which made the function call being answered, is not part of this runner's agents"
            ))
        })?;
        Ok((agent, branch))
    }
}

/// Where the user's message goes in the log, as ADK 2 stores it.
#[derive(Debug, Default)]
pub(super) struct UserPlace {
    pub(super) branch: String,
    pub(super) isolation_scope: String,
    /// The invocation the message goes on with: of the calls it answers, or of the task
    /// it joins.
    pub(super) joins: Option<String>,
}

/// Where the user's message is stored: on no branch and in no scope but in a task (ADK
/// 2's `mode: task`). An answer to calls goes on the calls' branch (in a task, in its
/// scope), going on with the calls' invocation (ADK's `_resolve_invocation_id_from_fr`;
/// answers to calls of several invocations, where `rules` take them, start one of their
/// own); any other message joins the task waiting for the user, if one does (or, as ADK
/// 2.13 does, the scope of a task that ended by transferring to a chat peer,
/// `task::left_to_peer`): on no branch, in the task's scope (so that only the task agent
/// sees it), going on with the task's invocation.
pub(super) fn user_place(
    root: &Arc<dyn Agent>,
    rules: AnswerRules,
    session: &Session,
    log: &RunLog,
    content: &Content,
) -> Result<UserPlace> {
    if let Some(answered) = answered_calls(rules, log, &session.id, content)? {
        let (branch, joins) = (answered.branch, answered.invocation_id);
        if task::scope(&branch).is_empty() {
            return Ok(UserPlace {
                joins,
                ..UserPlace::default()
            });
        }
        return Ok(UserPlace {
            isolation_scope: task::isolation_scope(root, &branch),
            branch,
            joins,
        });
    }
    let waiting = task::route(root, log)
        .map(|route| route.user_branch)
        .unwrap_or_default();
    let joined = task::joined(log, &waiting).or_else(|| task::left_to_peer(root, log));
    Ok(joined.map_or_else(UserPlace::default, |joined| UserPlace {
        branch: String::new(),
        isolation_scope: joined.isolation_scope,
        joins: Some(joined.invocation_id),
    }))
}

impl Runner {
    /// The invocation a message goes on with (see [`user_place`]): the one of the calls
    /// it answers, or of the task it joins. Read before the Run takes the session's
    /// lease, since its id is the lease's owner; the Run reads the log again under the
    /// lease (and meets there whatever refuses the message). None for a message that
    /// starts an invocation of its own (no read for one answering no call in a tree
    /// without task agents).
    pub(super) async fn invocation_joined(&self, user_id: &str, session_id: &str, content: &Content) -> Option<String> {
        if !task::has_task_agent(&self.root_agent) && !has_function_responses(content) {
            return None;
        }
        // A missing session or a failed read joins nothing: the Run meets it again.
        let session = self.load_turn(user_id, session_id, false, content, "").await.ok()?;
        let log = RunLog::new(session.events.as_slice().to_vec());
        user_place(&self.root_agent, self.answer_rules, &session, &log, content)
            .ok()?
            .joins
    }
}

/// The agent that has the conversation (ADK's `find_agent_to_run`): the newest reply's
/// agent when it and every agent above it may transfer to its parent (so it can hand
/// the conversation back), or the target of a transfer not answered yet; else the root.
fn agent_to_continue(root: &Arc<dyn Agent>, log: &RunLog) -> Arc<dyn Agent> {
    // A task or single-turn call's events answer its caller, which has the conversation.
    let replies = log
        .messages()
        .rev()
        .filter(|event| task::scope(&event.branch).is_empty() && event.author != USER_AUTHOR);
    for event in replies {
        let Some(author) = find_agent(root, &event.author) else {
            continue;
        };
        if let Some(target) = &event.actions.transfer_to_agent {
            let target = transfer_targets(root, &author).into_iter().find(|a| a.name() == target);
            if let Some(target) = target.filter(|target| transferable_across_tree(root, target)) {
                return target;
            }
        }
        if event.author == root.name() {
            break;
        }
        if transferable_across_tree(root, &author) {
            return author;
        }
    }
    root.clone()
}

/// The history budget of a turn when the runner sets none: the smallest default of
/// the tree's llm agents' models, so every agent's request fits its model
/// ([`history::DEFAULT_CONTEXT_BUDGET_TOKENS`] for a tree without one).
pub(super) fn default_context_budget(root: &Arc<dyn Agent>) -> usize {
    fn smallest(agent: &Arc<dyn Agent>) -> Option<usize> {
        let own = agent
            .spec()
            .model
            .map(|model| history::default_context_budget_tokens(model.provider()));
        agent.sub_agents().iter().filter_map(smallest).chain(own).min()
    }
    smallest(root).unwrap_or(history::DEFAULT_CONTEXT_BUDGET_TOKENS)
}

pub(super) fn has_function_responses(content: &Content) -> bool {
    content.function_responses().next().is_some()
}

/// ADK 2.13's words refusing a message of function responses with text (its runner's
/// `_validate_new_message`), which the runner's refusal quotes.
const ANSWERS_WITH_TEXT: &str = "Message cannot contain both function responses and text. \
Function responses resume an existing invocation while text starts a new one.";

/// How a message of function responses is taken, as ADK 2.13 takes it by the root
/// agent: its runner runs an llm agent at the root through its node runner, any other
/// agent (a workflow agent) through its older path, which checks less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AnswerRules {
    /// An llm agent at the root: responses beside text in one message are refused
    /// (`_validate_new_message`), and so are responses to calls of several invocations
    /// (`_resolve_invocation_id_from_fr`, strict).
    LlmRoot,
    /// Another agent at the root of an app marked resumable: text is taken beside the
    /// responses; responses to calls of several invocations are refused (strict).
    ResumableApp,
    /// Another agent at the root of an app not marked resumable: text is taken beside
    /// the responses, and responses to calls of several invocations start an invocation
    /// of their own (non-strict: ADK resolves no id and makes a new one).
    NewInvocationForSeveral,
}

impl AnswerRules {
    /// The rules for `root` at the root of an app marked resumable (ADK's
    /// `ResumabilityConfig`) or not.
    pub(super) fn of(root: &dyn Agent, app_is_resumable: bool) -> AnswerRules {
        match (root.spec().kind, app_is_resumable) {
            (AgentKind::Llm, _) => AnswerRules::LlmRoot,
            (_, true) => AnswerRules::ResumableApp,
            (_, false) => AnswerRules::NewInvocationForSeveral,
        }
    }
}

/// The calls a message's `function_response` parts answer: their author, branch and
/// invocation (None for calls of several invocations, which start one of their own).
#[derive(Debug, PartialEq)]
struct AnsweredCalls {
    author: String,
    branch: String,
    invocation_id: Option<String>,
}

/// For a message with `function_response` parts: the author and branch of the
/// event holding the matching calls in `log` (session `session_id`'s). None for an
/// ordinary message.
fn caller_of(
    rules: AnswerRules,
    log: &RunLog,
    session_id: &str,
    content: &Content,
) -> Result<Option<(String, String)>> {
    Ok(answered_calls(rules, log, session_id, content)?.map(|answered| (answered.author, answered.branch)))
}

/// The calls a message's `function_response` parts answer, each by its id: refused
/// unless every part has one, matching a call in `log`, all made by one agent on one
/// branch (ADK refuses an id of no call with a `ValueError`), in one invocation unless
/// `rules` take answers to several; refused beside text where `rules` say so. None for
/// a message answering no call.
fn answered_calls(
    rules: AnswerRules,
    log: &RunLog,
    session_id: &str,
    content: &Content,
) -> Result<Option<AnsweredCalls>> {
    // ADK checks this first, for any response with an id, whatever it answers; any text
    // counts, a thought's too.
    let has_text = content
        .parts
        .iter()
        .any(|part| matches!(&part.kind, PartKind::Text { text } if !text.is_empty()));
    if rules == AnswerRules::LlmRoot && has_text && content.function_responses().any(|response| !response.id.is_empty())
    {
        return Err(AdkError::invalid(
            "function_response",
            format!(
                "parts cannot come with text in one message to an llm agent at the root (send the text in a message of its own): {ANSWERS_WITH_TEXT}"
            ),
        ));
    }
    let mut answered: Option<AnsweredCalls> = None;
    for response in content.function_responses() {
        let id = Some(response.id).filter(|id| !id.is_empty()).ok_or_else(|| {
            AdkError::invalid(
                "function_response",
                format!(
                    "{} has no id: give the id of the function call it answers",
                    response.name
                ),
            )
        })?;
        let call = log.latest_call(id).ok_or_else(|| {
            AdkError::invalid(
                "function_response",
                format!("{id} answers no function call in session {session_id}"),
            )
        })?;
        let Some(first) = &mut answered else {
            answered = Some(AnsweredCalls {
                author: call.author.clone(),
                branch: call.branch.clone(),
                invocation_id: Some(call.invocation_id.clone()),
            });
            continue;
        };
        if (&first.author, &first.branch) != (&call.author, &call.branch) {
            return Err(AdkError::invalid(
                "function_response",
                "parts of one message must answer calls of one agent",
            ));
        }
        match &first.invocation_id {
            Some(invocation) if *invocation != call.invocation_id => {
                if rules != AnswerRules::NewInvocationForSeveral {
                    return Err(AdkError::invalid(
                        "function_response",
                        format!(
                            "parts of one message must answer calls of one invocation: {id} answers a call of {}, an earlier part one of {invocation}",
                            call.invocation_id
                        ),
                    ));
                }
                first.invocation_id = None;
            }
            _ => {}
        }
    }
    Ok(answered)
}

/// Appends `event` fenced with the invocation's lease (`fence`): refused once the
/// lease is lost, so a runner that stalled past its TTL cannot write after another took over.
pub(super) async fn append(
    service: &dyn SessionService,
    session: &Session,
    event: Event,
    fence: Precondition,
) -> Result<Event> {
    service.append_event(fenced(session, event, fence)).await
}

/// Keeps `event`, a workflow agent's position, beside the log (a run mark), fenced as
/// [`append`] is.
pub(super) async fn append_run_mark(
    service: &dyn SessionService,
    session: &Session,
    event: Event,
    fence: Precondition,
) -> Result<Event> {
    service.append_run_mark(fenced(session, event, fence)).await
}

fn fenced(session: &Session, event: Event, fence: Precondition) -> AppendEventRequest {
    AppendEventRequest {
        timestamp_missing: false,
        app_name: session.app_name.clone(),
        user_id: session.user_id.clone(),
        session_id: session.id.clone(),
        event,
        precondition: Some(fence),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{AGENT, Fixture, SESSION, Step, USER, drain};
    use super::*;
    use adk_grpc_core::{Events, FunctionResponseData, LeaseKey, Part, SessionLease, StateMap};
    use chrono::Utc;
    use serde_json::json;
    use std::time::Duration;

    fn session(events: Vec<Event>) -> Session {
        Session {
            id: "s".into(),
            app_name: "app".into(),
            user_id: "u".into(),
            state: StateMap::default(),
            event_count: events.len() as u64,
            events: Events::new(events),
            create_time: Utc::now(),
            last_update_time: Utc::now(),
            expire_time: None,
        }
    }

    /// An event of `author` on `branch` calling a tool with call id `id`.
    fn call(author: &str, branch: &str, id: &str) -> Event {
        let mut event = Event::new("e-1")
            .with_author(author)
            .with_content(Content::new("model").with_part(Part::function_call("lookup", json!({}), Some(id.into()))));
        event.branch = branch.into();
        event
    }

    fn answers(ids: &[Option<&str>]) -> Content {
        ids.iter().fold(Content::new("user"), |content, id| {
            let response = FunctionResponseData {
                name: "lookup".into(),
                response: json!({"found": true}),
            };
            content.with_part(Part::function_response(response, id.map(String::from)))
        })
    }

    fn refusal(result: Result<Option<(String, String)>>) -> String {
        match result {
            Err(AdkError::InvalidArgument { field, message }) => {
                assert_eq!(field, "function_response");
                message
            }
            other => panic!("not refused as INVALID_ARGUMENT: {other:?}"),
        }
    }

    #[test]
    fn a_function_response_goes_back_to_the_agent_and_branch_that_made_the_call() {
        let log = session(vec![call("planner", "", "c1"), call("helper", "team.helper", "c2")]);
        assert_eq!(
            caller_of(
                AnswerRules::LlmRoot,
                &RunLog::new(log.events.as_slice().to_vec()),
                &log.id,
                &Content::new("user").with_text("hi")
            )
            .unwrap(),
            None
        );
        assert_eq!(
            caller_of(
                AnswerRules::LlmRoot,
                &RunLog::new(log.events.as_slice().to_vec()),
                &log.id,
                &answers(&[Some("c2")])
            )
            .unwrap(),
            Some(("helper".into(), "team.helper".into()))
        );
        assert!(has_function_responses(&answers(&[Some("c2")])));
        assert!(!has_function_responses(&Content::new("user").with_text("hi")));
    }

    #[test]
    fn a_function_response_that_answers_no_call_of_one_agent_is_refused() {
        let log = session(vec![call("planner", "", "c1"), call("helper", "team.helper", "c2")]);
        let message = refusal(caller_of(
            AnswerRules::LlmRoot,
            &RunLog::new(log.events.as_slice().to_vec()),
            &log.id,
            &answers(&[None]),
        ));
        assert_eq!(
            message,
            "function_response lookup has no id: give the id of the function call it answers"
        );
        let message = refusal(caller_of(
            AnswerRules::LlmRoot,
            &RunLog::new(log.events.as_slice().to_vec()),
            &log.id,
            &answers(&[Some("c9")]),
        ));
        assert_eq!(message, "function_response c9 answers no function call in session s");
        let message = refusal(caller_of(
            AnswerRules::LlmRoot,
            &RunLog::new(log.events.as_slice().to_vec()),
            &log.id,
            &answers(&[Some("c1"), Some("c2")]),
        ));
        assert_eq!(
            message,
            "function_response parts of one message must answer calls of one agent"
        );
    }

    #[test]
    fn answers_beside_text_and_to_several_invocations_follow_the_roots_rules() {
        use AnswerRules::{LlmRoot, NewInvocationForSeveral, ResumableApp};
        let mut second = call("planner", "", "c2");
        second.invocation_id = "e-2".into();
        let log = RunLog::new(vec![call("planner", "", "c1"), second]);
        // ADK 2.13's node runner (an llm agent at the root) refuses answers beside text,
        // whatever they answer, before anything else; its older path (any other root)
        // takes them.
        let with_text = answers(&[Some("c1")]).with_text("and a note");
        for content in [&with_text, &answers(&[Some("c9")]).with_text("and a note")] {
            let refused = answered_calls(LlmRoot, &log, "s", content).unwrap_err().to_string();
            assert!(
                refused.starts_with("function_response ") && refused.contains(ANSWERS_WITH_TEXT),
                "{refused}"
            );
        }
        for rules in [ResumableApp, NewInvocationForSeveral] {
            let answered = answered_calls(rules, &log, "s", &with_text).unwrap().unwrap();
            assert_eq!(answered.invocation_id.as_deref(), Some("e-1"));
        }
        // An empty text is none (ADK reads `part.text`).
        let empty_text = answers(&[Some("c1")]).with_text("");
        assert!(answered_calls(LlmRoot, &log, "s", &empty_text).unwrap().is_some());
        // Answers to calls of two invocations: refused where ADK resolves strictly, an
        // invocation of their own where it does not.
        let both = answers(&[Some("c1"), Some("c2")]);
        for rules in [LlmRoot, ResumableApp] {
            let refused = answered_calls(rules, &log, "s", &both).unwrap_err().to_string();
            assert!(refused.contains("must answer calls of one invocation"), "{refused}");
        }
        assert_eq!(
            answered_calls(NewInvocationForSeveral, &log, "s", &both).unwrap(),
            Some(AnsweredCalls {
                author: "planner".into(),
                branch: String::new(),
                invocation_id: None,
            })
        );
    }

    #[tokio::test]
    async fn an_invocation_a_crash_cut_short_is_closed_in_its_agents_name_before_the_next() {
        let f = Fixture::new("session_close_interrupted").await;
        let key = LeaseKey {
            app_name: f.app.clone(),
            user_id: USER.into(),
            session_id: SESSION.into(),
        };
        // A runner took the lease, stored the user's message and half an answer, and died.
        f.leases
            .acquire(&key, "e-crashed", Duration::from_secs(5))
            .await
            .unwrap();
        let log = f.session().await;
        let user = Event::new("e-crashed")
            .with_author(USER_AUTHOR)
            .with_content(Content::new("user").with_text("hi"));
        let half = Event::new("e-crashed")
            .with_author(AGENT)
            .with_content(Content::new("model").with_text("half an"));
        for event in [user, half] {
            append(
                f.sessions.as_ref(),
                &log,
                event,
                Precondition::LeaseHeldBy("e-crashed".into()),
            )
            .await
            .unwrap();
        }
        f.clock.advance(Duration::from_secs(6));

        f.play(Step::Say("a whole answer"));
        f.end_script();
        let (_, error) = drain(f.run("again").await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");

        let events = f.session().await.events.into_vec();
        let closing = &events[2];
        assert_eq!(
            (
                closing.invocation_id.as_str(),
                closing.author.as_str(),
                closing.interrupted()
            ),
            ("e-crashed", AGENT, true)
        );
        let texts: Vec<String> = events[3..]
            .iter()
            .filter_map(|e| e.content().and_then(Content::text))
            .collect();
        assert_eq!(texts, ["again", "a whole answer"]);
    }
}
