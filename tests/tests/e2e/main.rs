//! The end-to-end tests, in one binary (one link, shared helpers): real redis-server and
//! Redis Cluster processes, real service processes, real gRPC clients. Run one module with
//! `cargo test -p adk-grpc-e2e --test e2e session_server::`.

mod a2a;
mod adk_config_dirs;
mod adk_python;
mod agent_modes;
mod agent_platform;
mod all_in_one;
mod artifact_server;
mod client_answers;
mod compression;
mod conformance;
mod contract;
mod docs_python;
mod durable_runs;
mod error_details;
mod faults;
mod grpc_web;
mod hooks;
mod hostile_input;
mod json_nesting;
mod locomo_bench;
mod long_conversations;
mod mcp;
mod mcp_resources;
mod memory;
mod metrics;
mod model_consult;
mod openapi;
mod readme_walkthrough;
mod reflection;
mod replicas;
mod reply_limits;
mod runner_server;
mod security;
mod session_inputs;
mod session_server;
mod state_schema;
mod structured_output;
mod telemetry;
mod tool_context;
