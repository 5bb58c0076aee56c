//! The embedding models against fake OpenAI `/embeddings` and Gemini `embedContent`
//! servers on loopback HTTP: the requests they send, the vectors they read back, the
//! errors they report, and the embeddings file.

use adk_grpc_core::memory::Embedder;
use adk_grpc_models::testing::{FakeReply, FakeServer, gemini, openai};
use adk_grpc_models::{GeminiEmbeddings, OpenAiEmbeddings, load_embedders};
use serde_json::json;
use std::io::Write;
use tonic::Code;

fn texts(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| t.to_string()).collect()
}

#[tokio::test]
async fn openai_embeddings_send_every_text_in_one_request_and_read_the_vectors_in_order() {
    let server = FakeServer::start().await;
    // The reply lists the second input first: the index, not the order, says which is which.
    server.push(FakeReply::json(json!({
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.5]},
        ],
        "model": "fake-embedding",
    })));
    let model = OpenAiEmbeddings::new(format!("{}/v1", server.url()), "text-embedding-3-small")
        .unwrap()
        .with_api_key("sk-test")
        .unwrap();
    let vectors = model.embed(&texts(&["first", "second"])).await.unwrap();
    assert_eq!(vectors, [vec![1.0, 0.5], vec![0.0, 1.0]]);
    let request = server.last_request();
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(
        request.json(),
        json!({"model": "text-embedding-3-small", "input": ["first", "second"]})
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));

    server.push(openai::embeddings(&[vec![0.25, 0.75]]));
    assert_eq!(model.embed(&texts(&["x"])).await.unwrap(), [vec![0.25, 0.75]]);
}

#[tokio::test]
async fn gemini_embeddings_call_embed_content_per_text() {
    let server = FakeServer::start().await;
    server.push(gemini::embedding(&[0.5, 0.5, 0.0]));
    server.push(gemini::embedding(&[0.0, 0.0, 1.0]));
    let model = GeminiEmbeddings::new("models/text-embedding-004")
        .unwrap()
        .with_base_url(server.url())
        .with_api_key("g-key")
        .unwrap();
    let vectors = model.embed(&texts(&["a", "b"])).await.unwrap();
    assert_eq!(vectors, [vec![0.5, 0.5, 0.0], vec![0.0, 0.0, 1.0]]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1beta/models/text-embedding-004:embedContent");
    assert_eq!(
        requests[0].json(),
        json!({"model": "models/text-embedding-004", "content": {"parts": [{"text": "a"}]}})
    );
    assert_eq!(requests[1].header("x-goog-api-key"), Some("g-key"));
}

#[tokio::test]
async fn provider_failures_and_malformed_vectors_are_errors_saying_so() {
    let server = FakeServer::start().await;
    server.push(FakeReply::status(429, r#"{"error": {"message": "slow down"}}"#));
    server.push(FakeReply::json(json!({"data": [{"index": 0, "embedding": ["x"]}]})));
    let model = OpenAiEmbeddings::new(server.url(), "m").unwrap();
    let limited = model.embed(&texts(&["a"])).await.unwrap_err();
    assert_eq!(limited.code(), Code::ResourceExhausted, "{limited}");
    let malformed = model.embed(&texts(&["a"])).await.unwrap_err();
    assert!(malformed.to_string().contains("non-number"), "{malformed}");
}

#[test]
fn the_embeddings_file_maps_apps_to_models_and_names_its_problems() {
    let write = |yaml: &str| {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(yaml.as_bytes()).unwrap();
        file
    };
    let good = write(
        "support: { provider: openai, model: text-embedding-3-small, base_url: 'http://127.0.0.1:1/v1' }\n\
         \"*\": { provider: gemini, model: text-embedding-004 }\n",
    );
    let embedders = load_embedders(good.path()).unwrap();
    let mut apps: Vec<&str> = embedders.keys().map(String::as_str).collect();
    apps.sort_unstable();
    assert_eq!(apps, ["*", "support"]);

    let mock = write("support: { provider: mock }\n");
    let err = load_embedders(mock.path())
        .err()
        .expect("mock has no embeddings")
        .to_string();
    assert!(
        err.contains("app \"support\"") && err.contains("no embedding model"),
        "{err}"
    );
    if !cfg!(feature = "local-embeddings") {
        let local = write("support: { provider: local, model: /models/all-MiniLM-L6-v2 }\n");
        let err = load_embedders(local.path())
            .err()
            .expect("no local model in this build")
            .to_string();
        assert!(err.contains("`local-embeddings` feature"), "{err}");
    }
    let typo = write("support: { provider: openai, model: m, modle: x }\n");
    let err = load_embedders(typo.path()).err().expect("a misspelt field").to_string();
    assert!(err.contains("unknown field `modle`"), "{err}");
}
