//! What one text costs the embedded model (docs/design/local-embeddings.md, "A search within
//! 10 ms"): embeds the first line of a file `runs` times alone and prints the wall time per text
//! (p50, min) and the process's CPU time per text (every thread's, from /proc/self/stat, the
//! figure that stays steady on a shared machine). With `--vectors` it prints each line's vector
//! instead, as JSON, for the reference script to compare.
//!
//! ```bash
//! cargo run --release -p adk-grpc-models --features local-embeddings --example local_embedding_profile -- \
//!     ~/.cache/adk/models/all-MiniLM-L6-v2 questions.txt 300
//! ```

use adk_grpc_core::memory::Embedder;
use adk_grpc_models::LocalEmbeddings;
use std::time::Instant;

/// User plus system CPU time of this process and all its threads, living or ended, in ms.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // The fields after the command name (which ends with the last ')'): utime and stime are the
    // 12th and 13th, in clock ticks of 10 ms.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks * 10.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, file, runs] = &args[..] else {
        eprintln!("usage: local_embedding_profile <model dir> <text file> <runs | --vectors>");
        std::process::exit(2);
    };
    let model = LocalEmbeddings::load(dir).expect("load the model");
    let lines: Vec<String> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    if runs == "--vectors" {
        let vectors = model.embed(&lines).await.unwrap();
        println!("{}", serde_json::json!({ "vectors": vectors }));
        return;
    }
    let runs: usize = runs.parse().expect("runs: a number");
    let text = &lines[..1];
    model.embed(text).await.unwrap();
    let (cpu_before, mut walls) = (cpu_ms(), Vec::with_capacity(runs));
    for _ in 0..runs {
        let start = Instant::now();
        std::hint::black_box(model.embed(text).await.unwrap());
        walls.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu_before) / runs as f64;
    walls.sort_by(f64::total_cmp);
    println!(
        "{runs} runs of {:?}: wall p50 {:.2} ms, min {:.2} ms; CPU {cpu:.2} ms per text",
        text[0],
        walls[runs / 2],
        walls[0]
    );
}
