//! `adk-bench memory-locomo`: how well SearchMemory finds what a question needs, on
//! LoCoMo (Maharana et al., ACL 2024: long conversations whose questions name the turns
//! holding their answers). The data set is not in the repository (CC BY-NC): give its
//! file, in the data set's own JSON format, with `--data`.
//!
//! Each conversation is one user and each of its sessions is added as a session's events
//! are (AddEventsToMemory): each turn one memory (`<speaker>: <text>`, its id the turn's
//! `dia_id`), found by its keywords with the turn before it. Each question
//! of categories 1-4 with evidence is asked as the query, unchanged, and scored on the
//! ranking SearchMemory returns (the server's most, 100):
//! - turn recall@k: an evidence turn is among the first k memories;
//! - session recall@k: every evidence turn's session is among the first k distinct
//!   sessions of the ranking.
//!
//! With `--memory-embeddings FILE` (the servers' flag, passed on) the bench's server
//! ranks by keywords and meaning fused; without, by keywords (BM25) alone.
//!
//! With `--memory-generation FILE` (the servers' flag too; its app `*`, as the bench's app
//! name is made up) each session's events are also given to GenerateMemories, so the user's
//! memories are the raw turns and the facts generated from them; a fact counts for the turns
//! it was generated from (its `source_event_ids`, the turns' `dia_id`s).
//!
//! With `--answer-model` and `--judge-model`, each question is also answered from the
//! memories found and the answer judged (locomo_answers.rs): answer accuracy, the J score.

#[path = "locomo_answers.rs"]
mod answers;

use super::start_target;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_testkit::unique_prefix;
use answers::{Answers, Asked};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct LocomoArgs {
    /// The LoCoMo file (a list of `{sample_id, conversation, qa, …}`).
    #[arg(long)]
    data: PathBuf,
    /// A running MemoryService (http://host:port); default: start redis-server and adk-session-server.
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
    /// The bench's server gets this `--memory-embeddings` file (keyword and semantic
    /// ranking fused); without it, keyword ranking alone.
    #[arg(long, conflicts_with = "embedded_model")]
    memory_embeddings: Option<PathBuf>,
    /// The bench's server embeds with the model inside it (`provider: local`), from DIR
    /// [default: $HOME/.cache/adk/models/all-MiniLM-L6-v2, where
    /// scripts/setup-embedding-model.sh installs it]; the server must be built with
    /// `--features adk-grpc-models/local-embeddings`.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    embedded_model: Option<Option<PathBuf>>,
    /// The bench's server gets this `--memory-generation` file (its app `*`): each session is
    /// also given to GenerateMemories, and the facts generated are memories too.
    #[arg(long)]
    memory_generation: Option<PathBuf>,
    #[command(flatten)]
    answers: answers::AnswerArgs,
    /// Use only the first N conversations (0: all).
    #[arg(long, default_value_t = 0)]
    conversations: usize,
    /// Ask only the first N scored questions of each conversation (0: all).
    #[arg(long, default_value_t = 0)]
    questions: usize,
}

#[derive(Deserialize)]
struct Sample {
    sample_id: String,
    conversation: serde_json::Map<String, serde_json::Value>,
    qa: Vec<Question>,
}

#[derive(Deserialize)]
struct Turn {
    speaker: String,
    dia_id: String,
    text: String,
}

#[derive(Deserialize)]
struct Question {
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    category: u8,
    /// The gold answer (a string or a number; category 5 has none).
    #[serde(default)]
    answer: Option<serde_json::Value>,
}

impl Question {
    /// The gold answer as text.
    fn gold(&self) -> String {
        match &self.answer {
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

/// The session of a turn id `D<session>:<turn>`.
fn session_of(dia_id: &str) -> Option<&str> {
    dia_id.split_once(':').map(|(session, _)| session)
}

impl Sample {
    /// Every turn, in order.
    fn turns(&self) -> Result<Vec<Turn>> {
        let mut sessions: Vec<(u32, &serde_json::Value)> = self
            .conversation
            .iter()
            .filter_map(|(key, turns)| {
                let number = key.strip_prefix("session_")?.parse().ok()?;
                Some((number, turns))
            })
            .collect();
        sessions.sort_by_key(|(number, _)| *number);
        let mut turns = Vec::new();
        for (number, session) in sessions {
            let session: Vec<Turn> = serde_json::from_value(session.clone())
                .with_context(|| format!("{} session {number}", self.sample_id))?;
            turns.extend(session);
        }
        Ok(turns)
    }

    /// The date of the session a turn id `D<n>:<turn>` belongs to (`session_<n>_date_time`).
    fn session_date(&self, dia_id: &str) -> Option<String> {
        let number = session_of(dia_id)?.strip_prefix('D')?;
        let date = self.conversation.get(&format!("session_{number}_date_time"))?;
        date.as_str().map(str::to_string)
    }
}

/// A question's evidence: the turn ids it names that the conversation has (the data
/// set writes a few as `D8:6; D9:17`).
fn evidence(question: &Question, known: &HashSet<String>) -> Vec<String> {
    question
        .evidence
        .iter()
        .flat_map(|ids| ids.split([';', ',']))
        .map(|id| id.trim().to_string())
        .filter(|id| known.contains(id))
        .collect()
}

/// Hits at 1, 5 and 10.
#[derive(Default)]
struct Recall {
    hits: [usize; 3],
}

const KS: [usize; 3] = [1, 5, 10];

impl Recall {
    fn count(&mut self, found_within: Option<usize>) {
        for (hits, k) in self.hits.iter_mut().zip(KS) {
            if found_within.is_some_and(|rank| rank <= k) {
                *hits += 1;
            }
        }
    }

    fn percent(&self, asked: usize) -> [f64; 3] {
        self.hits.map(|hits| 100.0 * hits as f64 / asked.max(1) as f64)
    }
}

/// The turns a memory stands for: a generated fact, the turns it was generated from; a
/// turn, itself.
fn memory_turns(memory: &pb::MemoryEntry) -> Vec<String> {
    match &memory.fact {
        Some(fact) => fact.source_event_ids.clone(),
        None => vec![memory.id.clone()],
    }
}

/// The 1-based rank of the first memory standing for an evidence turn in `ranked` (each
/// memory's turns).
fn turn_rank(ranked: &[Vec<String>], evidence: &[String]) -> Option<usize> {
    ranked
        .iter()
        .position(|turns| turns.iter().any(|id| evidence.contains(id)))
        .map(|at| at + 1)
}

/// How many distinct sessions of `ranked` (each memory's turns) it takes to hold every
/// evidence session.
fn session_rank(ranked: &[Vec<String>], evidence: &[String]) -> Option<usize> {
    let mut needed: HashSet<&str> = evidence.iter().filter_map(|id| session_of(id)).collect();
    let mut seen = HashSet::new();
    for id in ranked.iter().flatten() {
        let Some(session) = session_of(id) else { continue };
        if seen.insert(session) {
            needed.remove(session);
            if needed.is_empty() {
                return Some(seen.len());
            }
        }
    }
    None
}

/// A turn as the event a session would hold (its text `<speaker>: <text>`, so the
/// figures compare with those of earlier runs, which stored that text).
fn event(turn: &Turn) -> pb::Event {
    pb::Event {
        id: turn.dia_id.clone(),
        author: turn.speaker.clone(),
        content: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(format!("{}: {}", turn.speaker, turn.text))),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// The most memories a search returns (the server's limit).
const RANKED: i32 = 100;

/// The embeddings file of `--embedded-model`: every app embeds with the model in `dir`,
/// inside the server.
pub(crate) fn embedded_model_file(dir: Option<&PathBuf>) -> Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.clone(),
        None => PathBuf::from(std::env::var("HOME").context("HOME, for the default model directory")?)
            .join(".cache/adk/models/all-MiniLM-L6-v2"),
    };
    anyhow::ensure!(
        dir.is_dir(),
        "{}: no model directory (scripts/setup-embedding-model.sh installs all-MiniLM-L6-v2)",
        dir.display()
    );
    let file = std::env::temp_dir().join(format!("adk-bench-embedded-model-{}.yaml", std::process::id()));
    let config = serde_json::json!({"*": {"provider": "local", "model": dir}});
    // JSON is YAML.
    std::fs::write(&file, config.to_string()).with_context(|| format!("write {}", file.display()))?;
    Ok(file)
}

/// The bench's own server's flags: the memory files it is given.
fn server_flags(args: &LocomoArgs) -> Result<Vec<String>> {
    let embedded = match &args.embedded_model {
        Some(dir) => Some(embedded_model_file(dir.as_ref())?),
        None => None,
    };
    let files = [
        ("--memory-embeddings", &args.memory_embeddings.clone().or(embedded)),
        ("--memory-generation", &args.memory_generation),
    ];
    let mut flags = Vec::new();
    for (flag, file) in files {
        if let Some(file) = file {
            anyhow::ensure!(
                args.endpoint.is_none(),
                "{flag} needs the bench's own server (no --endpoint)"
            );
            flags.extend([flag.to_string(), file.display().to_string()]);
        }
    }
    Ok(flags)
}

/// What GenerateMemories made of the sessions (with --memory-generation).
#[derive(Default)]
struct Generated {
    sessions: usize,
    created: usize,
    updated: usize,
    deleted: usize,
    took: Duration,
}

impl Generated {
    /// Generates memories from one session's events.
    async fn session(
        &mut self,
        client: &mut MemoryServiceClient<tonic::transport::Channel>,
        app: &str,
        user: &str,
        events: Vec<pb::Event>,
    ) -> Result<()> {
        let started = Instant::now();
        let changes = client
            .generate_memories(pb::GenerateMemoriesRequest {
                app_name: app.to_string(),
                user_id: user.to_string(),
                events,
                ..Default::default()
            })
            .await
            .map_err(|status| anyhow::anyhow!("GenerateMemories: {status:?}"))?
            .into_inner()
            .memories;
        self.took += started.elapsed();
        self.sessions += 1;
        for change in changes {
            match change.action() {
                pb::MemoryAction::Created => self.created += 1,
                pb::MemoryAction::Updated => self.updated += 1,
                pb::MemoryAction::Deleted => self.deleted += 1,
                pb::MemoryAction::Unspecified => {}
            }
        }
        Ok(())
    }

    fn report(&self) -> String {
        format!(
            "generation: {} facts created, {} updated, {} deleted by GenerateMemories from {} sessions in {:.1} s ({:.2} s per session; not in the indexing rate)",
            self.created,
            self.updated,
            self.deleted,
            self.sessions,
            self.took.as_secs_f64(),
            self.took.as_secs_f64() / self.sessions.max(1) as f64
        )
    }
}

/// The question with the memories found, as the answer model is to read them, each with
/// the date of the LoCoMo session of its (first) turn, when the conversation took place: the
/// memory's own timestamp is when the bench added it.
fn as_asked<'a>(sample: &Sample, question: &'a Question, memories: &'a [pb::MemoryEntry], count: usize) -> Asked<'a> {
    let memories = memories
        .iter()
        .take(count)
        .map(|memory| {
            let turns = memory_turns(memory);
            (memory, turns.first().and_then(|turn| sample.session_date(turn)))
        })
        .collect();
    Asked {
        question: &question.question,
        gold: question.gold(),
        category: question.category,
        memories,
    }
}

pub async fn bench_locomo(args: LocomoArgs) -> Result<()> {
    let data = std::fs::read(&args.data).with_context(|| format!("read {}", args.data.display()))?;
    let mut samples: Vec<Sample> = serde_json::from_slice(&data).context("a LoCoMo file (list of samples)")?;
    if args.conversations > 0 {
        samples.truncate(args.conversations);
    }
    let setup = super::StoreSetup {
        server_args: server_flags(&args)?,
        ..Default::default()
    };
    let mut answers = Answers::from_args(&args.answers)?;
    let mut generated = args.memory_generation.as_ref().map(|_| Generated::default());
    let target = start_target(args.endpoint.clone(), "adk-session-server", setup).await;
    let mut client = MemoryServiceClient::connect(target.endpoint.clone())
        .await
        .context("connect")?;
    let app = unique_prefix("locomo");
    let ranking = if args.memory_embeddings.is_some() || args.embedded_model.is_some() {
        "keywords and meaning fused"
    } else {
        "keywords (BM25)"
    };
    let memories = if generated.is_some() {
        "raw turns and generated facts"
    } else {
        "raw turns"
    };
    println!(
        "endpoint {}, {} conversations, ranking: {ranking}, memories: {memories}\n",
        target.endpoint,
        samples.len()
    );

    let (mut stored, mut indexing) = (0usize, std::time::Duration::ZERO);
    let mut latency = Histogram::<u64>::new(3)?;
    let (mut turns_recall, mut sessions_recall, mut asked) = (Recall::default(), Recall::default(), 0usize);
    for sample in &samples {
        let turns = sample.turns()?;
        let known: HashSet<String> = turns.iter().map(|turn| turn.dia_id.clone()).collect();
        let started = Instant::now();
        let mut generating = Duration::ZERO;
        for session in turns.chunk_by(|a, b| session_of(&a.dia_id) == session_of(&b.dia_id)) {
            let events: Vec<pb::Event> = session.iter().map(event).collect();
            client
                .add_events_to_memory(pb::AddEventsToMemoryRequest {
                    app_name: app.clone(),
                    user_id: sample.sample_id.clone(),
                    session_id: session_of(&session[0].dia_id).unwrap_or_default().to_string(),
                    events: events.clone(),
                    custom_metadata: None,
                })
                .await
                .map_err(|status| anyhow::anyhow!("AddEventsToMemory: {status:?}"))?;
            if let Some(generated) = &mut generated {
                let before = generated.took;
                generated.session(&mut client, &app, &sample.sample_id, events).await?;
                generating += generated.took - before;
            }
        }
        indexing += started.elapsed() - generating;
        stored += turns.len();

        let scored = sample
            .qa
            .iter()
            .filter(|question| (1..=4).contains(&question.category))
            .map(|question| (question, evidence(question, &known)))
            .filter(|(_, evidence)| !evidence.is_empty());
        let limit = if args.questions == 0 {
            usize::MAX
        } else {
            args.questions
        };
        for (question, evidence) in scored.take(limit) {
            let started = Instant::now();
            let found = client
                .search_memory(pb::SearchMemoryRequest {
                    app_name: app.clone(),
                    user_id: sample.sample_id.clone(),
                    query: question.question.clone(),
                    limit: RANKED,
                })
                .await
                .map_err(|status| anyhow::anyhow!("SearchMemory: {status:?}"))?
                .into_inner();
            latency.record(started.elapsed().as_micros() as u64)?;
            if let Some(answers) = &mut answers {
                let count = answers.memories();
                answers
                    .answer(as_asked(sample, question, &found.memories, count))
                    .await?;
            }
            let ranked: Vec<Vec<String>> = found.memories.iter().map(memory_turns).collect();
            turns_recall.count(turn_rank(&ranked, &evidence));
            sessions_recall.count(session_rank(&ranked, &evidence));
            asked += 1;
        }
    }
    anyhow::ensure!(
        asked > 0,
        "no question of categories 1-4 with evidence in {}",
        args.data.display()
    );

    let ms = |micros: u64| micros as f64 / 1000.0;
    println!(
        "| ranking | questions | turn recall@1 / @5 / @10 | session recall@1 / @5 / @10 | search p50 ms | p99 ms | indexing memories/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    let [t1, t5, t10] = turns_recall.percent(asked);
    let [s1, s5, s10] = sessions_recall.percent(asked);
    println!(
        "| {ranking} | {asked} | {t1:.1} % / {t5:.1} % / {t10:.1} % | {s1:.1} % / {s5:.1} % / {s10:.1} % | {:.2} | {:.2} | {:.0} |",
        ms(latency.value_at_quantile(0.5)),
        ms(latency.value_at_quantile(0.99)),
        stored as f64 / indexing.as_secs_f64().max(1e-9),
    );
    if let Some(generated) = &generated {
        println!("\n{}", generated.report());
    }
    if let Some(answers) = &answers {
        println!("\n{}", answers.report());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| id.to_string()).collect()
    }

    /// Memories of one turn each.
    fn turns(turns: &[&str]) -> Vec<Vec<String>> {
        turns.iter().map(|id| vec![id.to_string()]).collect()
    }

    #[test]
    fn a_turn_counts_at_its_first_evidence_and_a_session_once_every_one_is_in() {
        let ranked = turns(&["D1:1", "D2:5", "D1:2", "D3:1"]);
        assert_eq!(turn_rank(&ranked, &ids(&["D3:1", "D1:2"])), Some(3));
        assert_eq!(turn_rank(&ranked, &ids(&["D9:9"])), None);
        // Sessions in ranking order: D1, D2, D3.
        assert_eq!(session_rank(&ranked, &ids(&["D3:7", "D2:1"])), Some(3));
        assert_eq!(session_rank(&ranked, &ids(&["D1:9"])), Some(1));
        assert_eq!(session_rank(&ranked, &ids(&["D1:1", "D4:1"])), None);
    }

    #[test]
    fn evidence_written_as_a_list_in_one_string_is_read() {
        let known: HashSet<String> = ["D8:6", "D9:17"].map(String::from).into();
        let question = Question {
            question: "q".into(),
            evidence: vec!["D8:6; D9:17".into(), "D99:1".into()],
            category: 1,
            answer: None,
        };
        assert_eq!(evidence(&question, &known), ids(&["D8:6", "D9:17"]));
    }

    #[test]
    fn a_fact_counts_for_each_turn_it_was_generated_from() {
        let fact = pb::MemoryEntry {
            id: "f1".into(),
            fact: Some(pb::MemoryFact {
                source_event_ids: ids(&["D2:3", "D4:1"]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let turn = pb::MemoryEntry {
            id: "D1:1".into(),
            ..Default::default()
        };
        let ranked: Vec<Vec<String>> = [&turn, &fact].into_iter().map(memory_turns).collect();
        assert_eq!(turn_rank(&ranked, &ids(&["D4:1"])), Some(2));
        // One fact holds two sessions: D1, then D2 and D4.
        assert_eq!(session_rank(&ranked, &ids(&["D2:9", "D4:9"])), Some(3));
    }
}
