//! Tracing setup: text or JSON lines on stderr, level from `RUST_LOG`.

use crate::args::{LogArgs, LogFormat};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// Installs the global subscriber. Without `RUST_LOG` the level is `info`; an
/// unparsable `RUST_LOG` directive is skipped rather than silencing all logs.
/// Calling it again (tests starting several servers) leaves the first one in place.
pub fn init_tracing(args: &LogArgs) {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy();
    // stderr keeps stdout free for anything a wrapper script may want to parse.
    // Colours only for a person at a terminal, never into log files or collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // Err only means a subscriber is already installed, which is fine.
    let _ = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// A binary's exit: 0 on success; otherwise the error with its causes logged on one
/// line (`cannot open the session store …: connection refused`) and 1.
pub fn exit_code(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
