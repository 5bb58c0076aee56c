//! The embedding model run inside the server (feature `local-embeddings`), on the real
//! all-MiniLM-L6-v2 that scripts/setup-embedding-model.sh installs: its vectors are
//! sentence-transformers' (checked against reference numbers computed from the same weights,
//! docs/design/local-embeddings.md) and rank a related memory first.

use adk_grpc_core::AdkError;
use adk_grpc_core::memory::{VectorIndex, cosine};
use adk_grpc_models::{ProviderConfig, ProviderKind, build_embedder};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Installs the model (a no-op once it is there) and returns its directory.
fn model_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/setup-embedding-model.sh");
    let output = Command::new(script).output().expect("run setup-embedding-model.sh");
    assert!(
        output.status.success(),
        "setup-embedding-model.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

#[tokio::test]
async fn the_local_model_embeds_as_sentence_transformers_and_ranks_the_related_memory_first() {
    let config = ProviderConfig::new(ProviderKind::Local, model_dir().to_str().unwrap());
    let model = build_embedder(&config).unwrap();
    let memories = [
        "Caroline adopted two rescue dogs last spring and walks them every evening.",
        "Melanie painted a sunrise over the lake and wants to show it at the fair.",
        "The quarterly report shows revenue grew by twelve percent this year.",
    ];
    let mut texts = vec!["What pets does Caroline have?".to_string()];
    texts.extend(memories.iter().map(|m| m.to_string()));
    let vectors = model.embed(&texts).await.unwrap();

    assert_eq!(vectors.len(), 4);
    let query = &vectors[0];
    assert_eq!(query.len(), 384);
    // The reference (numpy, same weights): the query starts [-0.03424, 0.03744, 0.00717, 0.05365]
    // and its cosine with the first memory is 0.6322. A wrong pooling (padding counted, CLS token)
    // or a missing normalisation moves both.
    for (got, want) in query.iter().zip([-0.03424, 0.03744, 0.00717, 0.05365]) {
        assert!((got - want).abs() < 1e-3, "query vector starts {:?}", &query[..4]);
    }
    assert!((cosine(query, &vectors[1]) - 0.6322).abs() < 0.01);
    let norm: f32 = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");

    // A batch pads its shorter texts: each vector is still the one the text gets alone.
    let alone = model.embed(&texts[..1]).await.unwrap();
    assert!(cosine(&alone[0], query) > 0.9999);

    let indexed: Vec<(String, Vec<f32>)> = ["dogs", "painting", "revenue"]
        .into_iter()
        .map(String::from)
        .zip(vectors[1..].iter().cloned())
        .collect();
    let ranked = VectorIndex::new(indexed).rank(query, 3);
    let ids: Vec<&str> = ranked.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        ["dogs"],
        "unrelated memories fall below the similarity floor: {ranked:?}"
    );
}

#[test]
fn a_local_model_directory_without_the_model_is_a_configuration_error() {
    let empty = tempfile::tempdir().unwrap();
    let config = ProviderConfig::new(ProviderKind::Local, empty.path().to_str().unwrap());
    match build_embedder(&config) {
        Err(AdkError::Config(message)) => assert!(message.contains("config.json"), "{message}"),
        other => panic!("expected a configuration error, got {:?}", other.map(|_| ())),
    }
}
