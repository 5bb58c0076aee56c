//! Hooks: ADK's callbacks (`before_agent` … `on_tool_error`) behind one trait,
//! [`Hook`], with two implementations: [`HttpHook`], an HTTP endpoint in any language
//! (docs/hooks.md, "Hooks"), and [`Callback`], a Rust closure. ADK's
//! plugins (the same callbacks for every agent of an app) are hooks too: an app's
//! hooks come first in each of its agents' [`Hooks`].
//!
//! At each point an agent's hooks are called in order, one chain for every point
//! ([`Hooks`]): each sees what the ones before it passed on, and the first that answers
//! in the place of the model, the tool or the agent ends the chain, as ADK's
//! `PluginManager` does.

mod chain;
mod closure;
mod codec;
mod hook;
mod http;

pub use chain::Hooks;
pub(crate) use chain::around_agent;
pub use closure::Callback;
pub use hook::{BeforeModel, BeforeTool, Decision, Hook, HookContext, HookPoint};
pub use http::{FailurePolicy, HttpHook};
