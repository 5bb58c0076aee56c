//! One shutdown signal for the whole process: the serve loop stops accepting
//! when it fires, and long-lived streams (WatchSession, later Run) end on it so
//! the graceful drain can complete.

use std::io;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A cloneable handle; every clone sees the same trigger.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A handle that fires only when [`Shutdown::trigger`] is called (tests, embedding).
    pub fn new() -> Self {
        Shutdown::default()
    }

    /// A handle that fires on the first SIGTERM or SIGINT. Must be called inside a
    /// tokio runtime; fails only if the signal handlers cannot be installed.
    pub fn on_signals() -> io::Result<Self> {
        let shutdown = Shutdown::new();
        let signal = termination_signal()?;
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            let name = signal.await;
            tracing::info!("received {name}, shutting down");
            trigger.trigger();
        });
        Ok(shutdown)
    }

    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// A token cancelled when the shutdown is triggered, for libraries that stop on a
    /// `CancellationToken` (the runner library's A2A service).
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Completes once the shutdown has been triggered (at once if it already was).
    /// Owned, so it can be moved into streams and spawned tasks.
    pub fn triggered(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }
}

/// Registers the handlers now (so a signal arriving during startup is not lost)
/// and returns a future naming the first signal received.
#[cfg(unix)]
fn termination_signal() -> io::Result<impl Future<Output = &'static str> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        }
    })
}

#[cfg(not(unix))]
fn termination_signal() -> io::Result<impl Future<Output = &'static str> + Send> {
    Ok(async {
        // If Ctrl-C cannot be awaited there is no signal to wait for; never fire.
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_clone_sees_the_trigger() {
        let shutdown = Shutdown::new();
        let waiter = tokio::spawn(shutdown.clone().triggered());
        assert!(!shutdown.is_triggered());
        shutdown.clone().trigger();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(shutdown.is_triggered());
        // Already triggered: completes at once.
        shutdown.triggered().await;
    }
}
