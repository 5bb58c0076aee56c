//! The agents crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test agents <module>::`.

mod adk_fields;
mod agents;
mod common;
mod leases;
mod long_conversations;
mod model_consult;
mod modes;
mod providers;
mod resume_workflows;
mod state_schema;
mod structured;
