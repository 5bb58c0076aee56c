//! ADK's `retry_config` for what a server can retry without repeating anything: a
//! model call that fails before its reply begins.

use adk_grpc_core::AdkError;
use backon::ExponentialBuilder;
use std::time::Duration;
use tonic::Code;

/// How a failed model call is tried again (ADK's `RetryConfig`, with its defaults).
/// Only transient failures are retried (`UNAVAILABLE`, `RESOURCE_EXHAUSTED`,
/// `DEADLINE_EXCEEDED`: a provider that is down, rate-limited or slow), and only
/// before any of the reply arrived, so nothing is streamed or stored twice.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Attempts in all, the first included; 0 or 1: no retry.
    pub max_attempts: u32,
    pub initial_delay: Duration,
    pub max_delay: Duration,
    /// Each delay is the previous one times this.
    pub backoff_factor: f32,
    /// Random extra delay (up to the delay itself), so replicas do not retry in step.
    pub jitter: bool,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 5,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            backoff_factor: 2.0,
            jitter: true,
        }
    }
}

impl RetryConfig {
    /// The pauses before each retry, in order.
    pub(super) fn backoff(&self) -> ExponentialBuilder {
        let builder = ExponentialBuilder::default()
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.backoff_factor)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize);
        if self.jitter { builder.with_jitter() } else { builder }
    }

    /// The delays of [`RetryConfig::backoff`], in order.
    #[cfg(test)]
    fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        backon::BackoffBuilder::build(self.backoff())
    }
}

/// Whether a model call that failed this way may succeed if made again.
pub(super) fn is_transient(error: &AdkError) -> bool {
    matches!(
        error.code(),
        Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_by_the_factor_up_to_the_cap_and_stop_after_the_attempts() {
        let config = RetryConfig {
            max_attempts: 4,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            backoff_factor: 2.0,
            jitter: false,
        };
        let millis: Vec<u128> = config.delays().map(|d| d.as_millis()).collect();
        assert_eq!(millis, [100, 200, 300]);
        let none = RetryConfig {
            max_attempts: 1,
            ..config
        };
        assert_eq!(none.delays().count(), 0);
        assert!(is_transient(&AdkError::Unavailable("down".into())));
        assert!(!is_transient(&AdkError::invalid("x", "bad")));
    }
}
