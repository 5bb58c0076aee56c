//! `adk-bench memory`: AddMemory and SearchMemory at several numbers of memories per
//! user, each client its own user. Two searches: a "needle" query whose word is in
//! exactly 10 memories of every user (its cost should not grow with the user's total:
//! a search reads only its words' postings), and a "typical" query of three words
//! drawn like the memories' words (their postings grow with the total, and so does
//! its cost).
//!
//! With `--embedding-dims N` the server gets an embedding model for every app: a tiny
//! OpenAI-compatible `/v1/embeddings` server of the bench's own, whose vectors (N
//! dimensions, each word hashed to one) cost next to nothing to compute, so the figures
//! are the suite's cost of semantic search (embedding call, reading the user's vectors,
//! brute-force cosine), not a model's.
//!
//! With `--embedded-model` as well, the users are filled that way, then the server is
//! restarted on the same store with all-MiniLM-L6-v2 inside it (`provider: local`), so
//! every measured search embeds its query with the real model and scans the stored
//! vectors of the same length: what a search costs at 100,000 memories without first
//! embedding 100,000 texts (about 40 minutes on two cores).

use super::{Phase, StoreSetup, measure, start_target};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_testkit::unique_prefix;
use anyhow::{Context, Result};
use std::path::PathBuf;
use tonic::transport::Channel;

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// A running MemoryService (http://host:port); default: start redis-server and adk-session-server.
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
    /// Concurrent clients, each with its own connection and user.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured operations per client and phase.
    #[arg(long, default_value_t = 200)]
    ops: usize,
    /// Memories per user to measure at (each user is filled up to it first; at least 10).
    /// Given twice, the last list counts.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1_000, 10_000], action = clap::ArgAction::Set)]
    sizes: Vec<usize>,
    /// Give every app an embedding model with vectors of this many dimensions (semantic
    /// search on top of keywords); 0: keyword search only. Needs the bench's own server.
    #[arg(long, default_value_t = 0)]
    embedding_dims: usize,
    /// After filling, restart the server with the embedding model inside it, from DIR
    /// [default: $HOME/.cache/adk/models/all-MiniLM-L6-v2]; `--embedding-dims` must be
    /// the model's (384 for all-MiniLM-L6-v2). The server must be built with
    /// `--features adk-grpc-models/local-embeddings`.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    embedded_model: Option<Option<PathBuf>>,
}

/// A word's dimension: FNV-1a of its bytes.
fn dimension(word: &str, dims: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in word.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash % dims as u64) as usize
}

/// Serves `POST /v1/embeddings` on a free loopback port: each text's vector counts its
/// words per hashed dimension. Returns the base URL.
async fn start_embedding_server(dims: usize) -> Result<String> {
    use axum::body::Bytes;
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::post;
    use serde_json::{Value, json};
    let embed = move |body: Bytes| async move {
        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mut vector = vec![0.0f32; dims];
                for word in text.as_str().unwrap_or_default().split_whitespace() {
                    vector[dimension(&word.to_lowercase(), dims)] += 1.0;
                }
                json!({"object": "embedding", "index": i, "embedding": vector})
            })
            .collect();
        let reply = json!({"object": "list", "data": data, "model": "bench-hash"});
        ([(CONTENT_TYPE, "application/json")], reply.to_string())
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let app = axum::Router::new().route("/v1/embeddings", post(embed));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

/// Words the memories are made of: 4,000 made-up words, drawn skewed (low indexes far
/// more often), as words of real text are.
const VOCABULARY: usize = 4_000;
const WORDS_PER_MEMORY: usize = 12;
/// How many memories of each user hold the needle word.
const NEEDLES: usize = 10;
/// Memories per AddMemory request while filling.
const FILL_BATCH: usize = 100;

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
            .map_err(|status| anyhow::anyhow!("AddMemory (fill): {status:?}"))?;
    }
    Ok(())
}

pub async fn bench_memory(args: MemoryArgs) -> Result<()> {
    anyhow::ensure!(
        args.embedded_model.is_none() || args.embedding_dims > 0,
        "--embedded-model needs --embedding-dims, the model's dimensions (the stored vectors' length)"
    );
    let mut setup = StoreSetup::default();
    let mut embeddings = None;
    if args.embedding_dims > 0 {
        anyhow::ensure!(
            args.endpoint.is_none(),
            "--embedding-dims needs the bench's own server (no --endpoint)"
        );
        let url = start_embedding_server(args.embedding_dims).await?;
        let file = std::env::temp_dir().join(format!("{}-embeddings.yaml", unique_prefix("adk-bench")));
        let hashed = format!("\"*\": {{ provider: openai, model: bench-hash, base_url: '{url}' }}\n");
        std::fs::write(&file, &hashed)?;
        setup.server_args = vec!["--memory-embeddings".into(), file.display().to_string()];
        let model = match &args.embedded_model {
            Some(dir) => Some(std::fs::read_to_string(super::locomo::embedded_model_file(
                dir.as_ref(),
            )?)?),
            None => None,
        };
        embeddings = Some(EmbeddingsFile {
            file: TempFile(file),
            hashed,
            model,
        });
    }
    let mut target = start_target(args.endpoint.clone(), "adk-session-server", setup).await;
    let endpoint = target.endpoint.clone();
    let mut clients = connect(&endpoint, args.concurrency).await?;
    println!(
        "endpoint {endpoint}, {} clients (one user each), {} ops per client and phase, {}\n",
        args.concurrency,
        args.ops,
        match (args.embedding_dims, &args.embedded_model) {
            (0, _) => "keyword search".to_string(),
            (dims, None) => format!("keyword + semantic search ({dims}-dimension vectors)"),
            (dims, Some(_)) => format!(
                "keyword + semantic search, the query embedded by the model inside the server \
                 (memories' {dims}-dimension vectors from the bench's hashed words)"
            ),
        }
    );
    println!("| operation | ops/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|");
    let app = unique_prefix("bench-memory");
    let mut filled = 0;
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    for size in sizes {
        if let Some(embeddings) = &embeddings {
            clients = embeddings
                .serve(Embeddings::Hashed, &mut target, args.concurrency)
                .await?;
        }
        let fills = clients.iter().cloned().enumerate().map(|(worker, mut client)| {
            let app = app.clone();
            async move { fill(&mut client, &app, &user(worker), filled, size).await }
        });
        futures::future::try_join_all(fills).await?;
        // The adds below grow each user by `ops`; the next size fills from there.
        filled = size + args.ops;
        if let Some(embeddings) = &embeddings {
            clients = embeddings
                .serve(Embeddings::Model, &mut target, args.concurrency)
                .await?;
        }

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

/// The server's `--memory-embeddings` file: the bench's hashed words, and with
/// `--embedded-model` the model inside the server, in turns.
struct EmbeddingsFile {
    file: TempFile,
    hashed: String,
    model: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Embeddings {
    /// What the users are filled with: vectors that cost nothing to compute.
    Hashed,
    /// What searches are measured with, when there is a model.
    Model,
}

impl EmbeddingsFile {
    /// With `--embedded-model`, restarts the server on the same store with the file naming
    /// `embeddings` (a no-op for the model's turn without one, and for the first fill);
    /// returns the clients, connected again.
    async fn serve(
        &self,
        embeddings: Embeddings,
        target: &mut super::Target,
        clients: usize,
    ) -> Result<Vec<MemoryServiceClient<Channel>>> {
        let (Some(model), Some(server)) = (&self.model, target.server.as_mut()) else {
            return connect(&target.endpoint, clients).await;
        };
        let config = match embeddings {
            Embeddings::Hashed => &self.hashed,
            Embeddings::Model => model,
        };
        if std::fs::read_to_string(&self.file.0)? != *config {
            std::fs::write(&self.file.0, config)?;
            server.restart().await;
        }
        connect(&target.endpoint, clients).await
    }
}

async fn connect(endpoint: &str, clients: usize) -> Result<Vec<MemoryServiceClient<Channel>>> {
    let mut connected = Vec::new();
    for _ in 0..clients {
        connected.push(
            MemoryServiceClient::connect(endpoint.to_string())
                .await
                .context("connect")?,
        );
    }
    Ok(connected)
}

/// A file removed when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn search(app: &str, user: &str, query: &str) -> pb::SearchMemoryRequest {
    pb::SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        limit: 10,
    }
}
