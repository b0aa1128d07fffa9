//! SDK types to the generated WIT types.

use gateway_guest_sdk::canonical;
use gateway_guest_sdk::errors::UpstreamFailure;
use gateway_guest_sdk::TranslateError;

use crate::exports::gateway::plugin::adapter::{PluginError, SseEvent, UpstreamError, Usage};

pub fn usage(usage: canonical::Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_tokens: usage.cached_tokens,
        reasoning_tokens: usage.reasoning_tokens,
    }
}

pub fn plugin_error(err: TranslateError) -> PluginError {
    match err {
        TranslateError::InvalidRequest(m) => PluginError::InvalidRequest(m),
        TranslateError::Unsupported(m) => PluginError::Unsupported(m),
        TranslateError::UpstreamFormat(m) => PluginError::UpstreamFormat(m),
    }
}

pub fn upstream_error(failure: UpstreamFailure) -> UpstreamError {
    UpstreamError {
        status: failure.status,
        code: failure.code.to_owned(),
        message: failure.message,
        retryable: failure.retryable,
    }
}

/// Data-only events, as OpenAI streams are.
pub fn data_events(payloads: Vec<String>) -> Vec<SseEvent> {
    payloads
        .into_iter()
        .map(|data| SseEvent { event: None, data })
        .collect()
}

/// For log lines.
pub fn error_text(err: &PluginError) -> &str {
    match err {
        PluginError::InvalidRequest(m)
        | PluginError::Unsupported(m)
        | PluginError::UpstreamFormat(m) => m,
    }
}
