//! `adk-bench memory-locomo --answer-model FILE --judge-model FILE`: answer accuracy on
//! LoCoMo as the published figures measure it (Mem0's paper, Chhikara et al. 2025, "LLM-as-a-Judge",
//! the J score). For each question an answer model reads the memories SearchMemory
//! returned first and answers briefly; a judge model compares that answer with the data
//! set's gold answer and labels it CORRECT or WRONG. The J score is the share of CORRECT.
//! The prompts are [`LOCOMO_ANSWER_PROMPT`] and [`LOCOMO_JUDGE_PROMPT`] (BENCHMARKS.md names them).

use adk_grpc_core::{Llm, ask_once, strip_code_fence};
use adk_grpc_models::{ProviderConfig, build_model};
use adk_grpc_proto::v1 as pb;
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The answer model's instruction: this project's wording of the answer prompt of Mem0's
/// LoCoMo evaluation (Chhikara et al. 2025, "Mem0: Building Production-Ready AI Agents with
/// Scalable Long-Term Memory", its appendix): answer from the memories alone, in a few
/// words, relative dates turned into dates by the memories' times.
pub const LOCOMO_ANSWER_PROMPT: &str = "You answer a question about a long conversation between two people, \
using only the memories of it listed below (each with its time, when known, and who said it). \
Read all of them; when memories disagree, trust the more recent one. When a memory speaks of a \
relative time (\"last year\", \"two weeks ago\", \"next month\"), work out the actual date from the \
memory's time and answer with that date, not the relative words. Answer in at most six words, \
with no explanation. If the memories do not tell, give your best short guess.";

/// The judge model's instruction: this project's wording of the judge prompt of the same
/// evaluation (its "LLM-as-a-Judge"): generous about wording and length, strict about
/// the fact; JSON with one label.
pub const LOCOMO_JUDGE_PROMPT: &str = "You grade an answer to a question about a conversation. You are \
given the question, the gold answer and a generated answer. Label the generated answer CORRECT when \
it states the same thing as the gold answer: it may be longer, worded differently or give more \
detail, as long as it names the same fact, person, thing or time. For a question about time, the \
same date or period written in another format (\"May 7th\" for \"7 May 2023\") is CORRECT. Label it \
WRONG when it states something else, contradicts the gold answer, or does not answer. \
Answer with JSON only, of the form {\"label\": \"CORRECT\"} or {\"label\": \"WRONG\"}.";

#[derive(clap::Args)]
pub struct AnswerArgs {
    /// A provider config (YAML: `provider: openai|gemini`, `model`, `base_url`, `base_url_env`,
    /// `api_key_env`, …) of the model that answers each question from the memories found;
    /// with --judge-model, the answers' accuracy (J score) is reported.
    #[arg(long, requires = "judge_model")]
    answer_model: Option<PathBuf>,
    /// A provider config of the model that labels each answer CORRECT or WRONG against the
    /// data set's answer (the same file as --answer-model will do).
    #[arg(long, requires = "answer_model")]
    judge_model: Option<PathBuf>,
    /// The answer model reads the first N memories SearchMemory returns.
    #[arg(long, default_value_t = 10)]
    answer_memories: usize,
}

/// A model of a provider config file.
fn load_model(path: &Path) -> Result<Arc<dyn Llm>> {
    let file = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("read {file}"))?;
    let config: ProviderConfig = yaml_serde::from_str(&text).with_context(|| format!("{file}: a provider config"))?;
    build_model(&config).with_context(|| format!("{file}: the model"))
}

/// One question as the answer model and the judge see it.
pub struct Asked<'a> {
    pub question: &'a str,
    /// The data set's answer.
    pub gold: String,
    pub category: u8,
    /// SearchMemory's ranking, best first, each with when it was said, if known.
    pub memories: Vec<(&'a pb::MemoryEntry, Option<String>)>,
}

/// Answers each question, has it judged, and keeps the counts.
pub struct Answers {
    answer_model: Arc<dyn Llm>,
    judge_model: Arc<dyn Llm>,
    memories: usize,
    /// Per category: (questions, judged CORRECT).
    by_category: BTreeMap<u8, (usize, usize)>,
    /// Judge replies with no readable label (counted WRONG).
    unreadable: usize,
    memory_chars: usize,
    latency: Histogram<u64>,
}

impl Answers {
    /// None without --answer-model.
    pub fn from_args(args: &AnswerArgs) -> Result<Option<Answers>> {
        let (Some(answer), Some(judge)) = (&args.answer_model, &args.judge_model) else {
            return Ok(None);
        };
        anyhow::ensure!(args.answer_memories > 0, "--answer-memories must be at least 1");
        Ok(Some(Answers {
            answer_model: load_model(answer)?,
            judge_model: load_model(judge)?,
            memories: args.answer_memories,
            by_category: BTreeMap::new(),
            unreadable: 0,
            memory_chars: 0,
            latency: Histogram::new(3)?,
        }))
    }

    /// How many memories a question's answer reads.
    pub fn memories(&self) -> usize {
        self.memories
    }

    /// Asks the answer model, then the judge, and counts the label.
    pub async fn answer(&mut self, asked: Asked<'_>) -> Result<()> {
        let memories = memory_lines(&asked.memories);
        self.memory_chars += memories.chars().count();
        let started = Instant::now();
        let answer = ask_once(
            self.answer_model.as_ref(),
            LOCOMO_ANSWER_PROMPT.to_string(),
            format!("Memories:\n{memories}\n\nQuestion: {}\nAnswer:", asked.question),
            false,
        )
        .await
        .context("the answer model")?;
        self.latency.record(started.elapsed().as_micros() as u64)?;
        let judgement = ask_once(
            self.judge_model.as_ref(),
            LOCOMO_JUDGE_PROMPT.to_string(),
            format!(
                "Question: {}\nGold answer: {}\nGenerated answer: {}",
                asked.question,
                asked.gold,
                answer.trim()
            ),
            true,
        )
        .await
        .context("the judge model")?;
        let correct = label(&judgement);
        self.unreadable += usize::from(correct.is_none());
        let counts = self.by_category.entry(asked.category).or_default();
        counts.0 += 1;
        counts.1 += usize::from(correct == Some(true));
        Ok(())
    }

    /// The J score table, per category and overall, and what the answers cost.
    pub fn report(&self) -> String {
        let percent = |(asked, correct): (usize, usize)| 100.0 * correct as f64 / asked.max(1) as f64;
        let mut lines = vec![
            format!(
                "answers by {} from the first {} memories, judged by {} (prompts LOCOMO_ANSWER_PROMPT, LOCOMO_JUDGE_PROMPT)",
                self.answer_model.name(),
                self.memories,
                self.judge_model.name()
            ),
            "| category | questions | J score |".to_string(),
            "|---|---|---|".to_string(),
        ];
        let mut all = (0, 0);
        for (category, &(asked, correct)) in &self.by_category {
            lines.push(format!(
                "| {category} ({}) | {asked} | {:.1} % |",
                category_name(*category),
                percent((asked, correct))
            ));
            all = (all.0 + asked, all.1 + correct);
        }
        lines.push(format!("| all | {} | {:.1} % |", all.0, percent(all)));
        let ms = |micros: u64| micros as f64 / 1000.0;
        lines.push(format!(
            "memories sent per question: {:.0} tokens on average (characters / 4); answer latency p50 {:.1} ms, p99 {:.1} ms; judge replies without a label (counted WRONG): {}",
            self.memory_chars as f64 / 4.0 / all.0.max(1) as f64,
            ms(self.latency.value_at_quantile(0.5)),
            ms(self.latency.value_at_quantile(0.99)),
            self.unreadable
        ));
        lines.join("\n")
    }
}

/// LoCoMo's question categories (5, adversarial, is not asked).
fn category_name(category: u8) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        _ => "other",
    }
}

/// The memories as the answer model reads them, one a line: `[time] author: text`.
fn memory_lines(memories: &[(&pb::MemoryEntry, Option<String>)]) -> String {
    let lines = memories.iter().map(|(memory, time)| {
        let text = memory
            .content
            .iter()
            .flat_map(|content| &content.parts)
            .filter_map(|part| match &part.kind {
                Some(pb::part::Kind::Text(text)) => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        // A turn's text already starts with its speaker.
        let said = if memory.author.is_empty() || text.starts_with(&format!("{}:", memory.author)) {
            text
        } else {
            format!("{}: {text}", memory.author)
        };
        match time {
            Some(time) => format!("- [{time}] {said}"),
            None => format!("- {said}"),
        }
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// The judge's verdict: Some(true) for CORRECT, Some(false) for another label, None when
/// the reply holds no JSON label.
fn label(reply: &str) -> Option<bool> {
    #[derive(Deserialize)]
    struct Judgement {
        label: String,
    }
    let judgement: Judgement = serde_json::from_str(strip_code_fence(reply)).ok()?;
    Some(judgement.label.trim().eq_ignore_ascii_case("CORRECT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judges_label_is_read_from_json_fenced_or_not() {
        assert_eq!(label(r#"{"label": "CORRECT"}"#), Some(true));
        assert_eq!(label("```json\n{\"label\": \"correct\"}\n```"), Some(true));
        assert_eq!(label(r#"{"label": "WRONG"}"#), Some(false));
        assert_eq!(label("CORRECT"), None);
    }
}
