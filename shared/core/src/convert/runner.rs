//! The runner's settings of one invocation, from `adk.v1`.

use crate::agent::{RunConfig, StreamingMode};
use crate::error::{AdkError, Result};
use adk_grpc_proto::v1 as pb;

/// A Run request's `run_config`; errors name `run_config.<field>`. Unset fields
/// are the defaults: no streaming, [`RunConfig::DEFAULT_MAX_LLM_CALLS`] model calls,
/// other agents' thoughts left out.
impl TryFrom<&pb::RunConfig> for RunConfig {
    type Error = AdkError;

    fn try_from(config: &pb::RunConfig) -> Result<Self> {
        let streaming_mode = match pb::StreamingMode::try_from(config.streaming_mode) {
            Ok(pb::StreamingMode::Unspecified | pb::StreamingMode::None) => StreamingMode::None,
            Ok(pb::StreamingMode::Sse) => StreamingMode::Sse,
            Err(_) => {
                return Err(AdkError::invalid(
                    "run_config.streaming_mode",
                    format!("{} is not a known StreamingMode", config.streaming_mode),
                ));
            }
        };
        let max_llm_calls = match u32::try_from(config.max_llm_calls) {
            Ok(0) => RunConfig::DEFAULT_MAX_LLM_CALLS,
            Ok(n) => n,
            Err(_) => {
                return Err(AdkError::invalid(
                    "run_config.max_llm_calls",
                    format!("must not be negative, got {}", config.max_llm_calls),
                ));
            }
        };
        Ok(RunConfig {
            streaming_mode,
            max_llm_calls,
            include_thoughts_from_other_agents: config.include_thoughts_from_other_agents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_config_defaults_and_bounds() {
        assert_eq!(
            RunConfig::try_from(&pb::RunConfig::default()).unwrap(),
            RunConfig::default()
        );
        let sse = pb::RunConfig {
            streaming_mode: pb::StreamingMode::Sse as i32,
            max_llm_calls: 3,
            include_thoughts_from_other_agents: true,
        };
        let config = RunConfig::try_from(&sse).unwrap();
        assert_eq!(
            (
                config.streaming_mode,
                config.max_llm_calls,
                config.include_thoughts_from_other_agents
            ),
            (StreamingMode::Sse, 3, true)
        );
        for (bad, field) in [
            (
                pb::RunConfig {
                    streaming_mode: 9,
                    max_llm_calls: 0,
                    ..Default::default()
                },
                "run_config.streaming_mode",
            ),
            (
                pb::RunConfig {
                    streaming_mode: 0,
                    max_llm_calls: -1,
                    ..Default::default()
                },
                "run_config.max_llm_calls",
            ),
        ] {
            let err = RunConfig::try_from(&bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().contains(field), "{err}");
        }
    }
}
