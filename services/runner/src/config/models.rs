//! The declared models, built with the models library's one constructor
//! ([`build_model`]), each once per app that uses it: an app's agents and its
//! summariser share an instance, apps do not (a scripted mock plays its script
//! per app). A model no app uses is built once all the same, so a bad provider
//! setting or a missing API key variable fails the start rather than a later edit.

use super::file::AgentsFile;
use super::problems::{Problems, library_message};
use adk_grpc_core::Llm;
use adk_grpc_models::{ProviderConfig, build_model};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// One app's models, by declared name.
pub(super) type AppModels = HashMap<String, Arc<dyn Llm>>;

/// Every app's models, by app name. A model that cannot be built is reported
/// once, at the model, and left out (the agents that use it are not built).
pub(super) fn build_models(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, AppModels> {
    let mut providers = BTreeMap::new();
    for (name, value) in &spec.models {
        match ProviderConfig::deserialize(value) {
            Ok(provider) => {
                providers.insert(name.as_str(), provider);
            }
            Err(e) => problems.add(&place(name), None, e.to_string()),
        }
    }
    let mut failed = BTreeSet::new();
    let mut used = BTreeSet::new();
    let mut build = |name: &str, problems: &mut Problems| -> Option<Arc<dyn Llm>> {
        let provider = providers.get(name)?;
        if failed.contains(name) {
            return None;
        }
        build_model(provider)
            .inspect_err(|e| {
                problems.add(&place(name), None, library_message(e));
                failed.insert(name.to_string());
            })
            .ok()
    };
    let mut apps = BTreeMap::new();
    for (app_name, app) in &spec.apps {
        let mut models = AppModels::new();
        for name in app.model_names(&spec.tools) {
            used.insert(name.to_string());
            if !models.contains_key(name)
                && let Some(model) = build(name, problems)
            {
                models.insert(name.to_string(), model);
            }
        }
        apps.insert(app_name.clone(), models);
    }
    for name in spec.models.keys().filter(|name| !used.contains(*name)) {
        build(name, problems);
    }
    apps
}

fn place(name: &str) -> String {
    format!("model {name:?}")
}
