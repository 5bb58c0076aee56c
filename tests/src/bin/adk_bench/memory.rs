//! `adk-bench memory`: AddMemory and SearchMemory at several numbers of memories per
//! user, each client its own user. Two searches: a "needle" query whose word is in
//! exactly 10 memories of every user (its cost should not grow with the user's total:
//! a search reads only its words' postings), and a "typical" query of three words
//! drawn like the memories' words (their postings grow with the total, and so does
//! its cost).

use super::{Phase, StoreSetup, measure, start_target};
use adk_proto::v1 as pb;
use adk_proto::v1::memory_service_client::MemoryServiceClient;
use adk_testkit::unique_prefix;
use anyhow::{Context, Result};
use tonic::transport::Channel;

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// A running MemoryService (http://host:port); default: start redis-server and adk-session-server.
    #[arg(long)]
    endpoint: Option<String>,
    /// Concurrent clients, each with its own connection and user.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured operations per client and phase.
    #[arg(long, default_value_t = 200)]
    ops: usize,
    /// Memories per user to measure at (each user is filled up to it first; at least 10).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1_000, 10_000])]
    sizes: Vec<usize>,
}

/// Words the memories are made of: 4,000 made-up words, drawn skewed (low indexes far
/// more often), as words of real text are.
const VOCABULARY: usize = 4_000;
const WORDS_PER_MEMORY: usize = 12;
/// How many memories of each user hold the needle word.
const NEEDLES: usize = 10;
/// Memories per AddMemory request while filling.
const FILL_BATCH: usize = 500;

/// A deterministic generator (xorshift), so every run stores the same text.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A word index, skewed: the square of a uniform draw favours low indexes.
    fn word(&mut self) -> String {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        word((u * u * VOCABULARY as f64) as usize)
    }

    fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// Word `n` of the vocabulary: syllables spelled from its digits.
fn word(n: usize) -> String {
    const SYLLABLES: [&str; 10] = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pu"];
    let digits = format!("{n:04}");
    digits.bytes().map(|d| SYLLABLES[(d - b'0') as usize]).collect()
}

fn entry(text: String) -> pb::MemoryEntry {
    pb::MemoryEntry {
        content: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(text)),
                ..Default::default()
            }],
        }),
        author: "user".into(),
        ..Default::default()
    }
}

fn user(worker: usize) -> String {
    format!("bench-{worker}")
}

/// Adds memories to `user` until it holds `target`, the first `NEEDLES` of them holding
/// the needle word.
async fn fill(
    client: &mut MemoryServiceClient<Channel>,
    app: &str,
    user: &str,
    from: usize,
    target: usize,
) -> Result<()> {
    let mut words = Words(0x9E37_79B9_7F4A_7C15 ^ from as u64);
    let mut next = from;
    while next < target {
        let batch = (next..target.min(next + FILL_BATCH))
            .map(|i| {
                let mut text = words.sentence(WORDS_PER_MEMORY);
                if i < NEEDLES {
                    text.push_str(" needle");
                }
                entry(text)
            })
            .collect::<Vec<_>>();
        next += batch.len();
        client
            .add_memory(pb::AddMemoryRequest {
                app_name: app.into(),
                user_id: user.into(),
                memories: batch,
                custom_metadata: None,
            })
            .await
            .context("AddMemory (fill)")?;
    }
    Ok(())
}

pub async fn bench_memory(args: MemoryArgs) -> Result<()> {
    let target = start_target(args.endpoint.clone(), "adk-session-server", StoreSetup::default()).await;
    let endpoint = target.endpoint.clone();
    let mut clients = Vec::new();
    for _ in 0..args.concurrency {
        clients.push(
            MemoryServiceClient::connect(endpoint.clone())
                .await
                .context("connect")?,
        );
    }
    println!(
        "endpoint {endpoint}, {} clients (one user each), {} ops per client and phase\n",
        args.concurrency, args.ops
    );
    println!("| operation | ops/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|");
    let app = unique_prefix("bench-memory");
    let mut filled = 0;
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    for size in sizes {
        let fills = clients.iter().cloned().enumerate().map(|(worker, mut client)| {
            let app = app.clone();
            async move { fill(&mut client, &app, &user(worker), filled, size).await }
        });
        futures::future::try_join_all(fills).await?;
        // The adds below grow each user by `ops`; the next size fills from there.
        filled = size + args.ops;

        let phases: Vec<Phase> = vec![
            measure(format!("SearchMemory needle @ {size}"), &clients, args.ops, {
                let app = app.clone();
                move |mut client: MemoryServiceClient<Channel>, worker, _| {
                    let app = app.clone();
                    async move {
                        let found = client
                            .search_memory(search(&app, &user(worker), "needle"))
                            .await?
                            .into_inner();
                        anyhow::ensure!(
                            found.memories.len() == NEEDLES,
                            "found {} needles",
                            found.memories.len()
                        );
                        Ok(())
                    }
                }
            })
            .await?,
            measure(format!("SearchMemory typical @ {size}"), &clients, args.ops, {
                let app = app.clone();
                move |mut client: MemoryServiceClient<Channel>, worker, i| {
                    let app = app.clone();
                    async move {
                        let query = Words(0xD1B5_4A32_D192_ED03 ^ (worker * 1_000_003 + i) as u64).sentence(3);
                        client.search_memory(search(&app, &user(worker), &query)).await?;
                        Ok(())
                    }
                }
            })
            .await?,
            measure(format!("AddMemory (1 entry) @ {size}"), &clients, args.ops, {
                let app = app.clone();
                move |mut client: MemoryServiceClient<Channel>, worker, i| {
                    let app = app.clone();
                    async move {
                        let text =
                            Words(0xA076_1D64_78BD_642F ^ (worker * 1_000_003 + i) as u64).sentence(WORDS_PER_MEMORY);
                        client
                            .add_memory(pb::AddMemoryRequest {
                                app_name: app,
                                user_id: user(worker),
                                memories: vec![entry(text)],
                                custom_metadata: None,
                            })
                            .await?;
                        Ok(())
                    }
                }
            })
            .await?,
        ];
        for phase in &phases {
            println!("{}", phase.row());
        }
    }
    Ok(())
}

fn search(app: &str, user: &str, query: &str) -> pb::SearchMemoryRequest {
    pb::SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        limit: 10,
    }
}
