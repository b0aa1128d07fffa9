use gateway_guest_sdk::errors::map_openai_error;
use gateway_guest_sdk::openai_passthrough::finish_response;

use crate::convert::{plugin_error, upstream_error, usage};
use crate::exports::gateway::plugin::adapter::{
    PluginError, RequestCtx, Translated, UpstreamError,
};

pub fn translate_response(ctx: &RequestCtx, body: &[u8]) -> Result<Translated, PluginError> {
    let finished = finish_response(body, &ctx.model).map_err(plugin_error)?;
    Ok(Translated {
        // Whatever 2xx the vendor used, the client asked for a completion and got one.
        status: 200,
        content_type: "application/json".to_owned(),
        body: finished.body,
        usage: finished.usage.map(usage),
    })
}

pub fn translate_error(status: u16, body: &[u8]) -> UpstreamError {
    upstream_error(map_openai_error(status, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::ctx;
    use serde_json::{json, Value};

    #[test]
    fn answers_carry_the_client_model_and_usage_details() {
        let vendor = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-upstream",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
                      "completion_tokens_details": {"reasoning_tokens": 3}}
        });
        let out = translate_response(&ctx(false), vendor.to_string().as_bytes()).unwrap();
        assert_eq!(out.status, 200);
        assert_eq!(out.content_type, "application/json");
        let body: Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(body["model"], "gpt-client");
        assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        assert_eq!(
            body["usage"]["completion_tokens_details"]["reasoning_tokens"],
            3
        );
        let usage = out.usage.unwrap();
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_tokens,
                usage.reasoning_tokens
            ),
            (10, 4, 0, 3)
        );
    }

    #[test]
    fn unreadable_answers_are_upstream_format() {
        assert!(matches!(
            translate_response(&ctx(false), b"<html>oops</html>"),
            Err(PluginError::UpstreamFormat(_))
        ));
    }

    #[test]
    fn vendor_errors_map_to_gateway_terms() {
        let body = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let err = translate_error(429, body);
        assert_eq!(
            (err.status, err.code.as_str(), err.retryable),
            (503, "upstream_quota_exceeded", true)
        );
        assert_eq!(
            err.message,
            "upstream answered 429: You exceeded your current quota"
        );
        let err = translate_error(
            401,
            br#"{"error":{"message":"Incorrect API key provided: sk-abcd****wxyz"}}"#,
        );
        assert_eq!(err.code, "upstream_auth_failed");
        assert!(!err.message.contains("sk-"));
    }
}
