use gateway_guest_sdk::openai_passthrough::prepare_request;

use crate::convert::plugin_error;
use crate::exports::gateway::plugin::adapter::{PluginError, RequestCtx, UpstreamRequest};
use crate::gateway::plugin::types::{Header, Protocol};

/// Appended by the host to the channel's base URL, which ends in `/v1`.
pub const CHAT_PATH: &str = "/chat/completions";

pub fn translate_request(ctx: &RequestCtx, body: &[u8]) -> Result<UpstreamRequest, PluginError> {
    if ctx.client_protocol != Protocol::OpenaiChat {
        return Err(PluginError::Unsupported(format!(
            "the openai adapter does not translate {:?} requests",
            ctx.client_protocol
        )));
    }
    let prepared = prepare_request(body, &ctx.upstream_model, ctx.stream).map_err(plugin_error)?;
    Ok(UpstreamRequest {
        method: "POST".to_owned(),
        path: CHAT_PATH.to_owned(),
        headers: vec![Header {
            name: "content-type".to_owned(),
            value: "application/json".to_owned(),
        }],
        body: prepared.body,
        state: prepared.state,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    pub(crate) fn ctx(stream: bool) -> RequestCtx {
        RequestCtx {
            client_protocol: Protocol::OpenaiChat,
            model: "gpt-client".to_owned(),
            upstream_model: "gpt-upstream".to_owned(),
            stream,
            request_id: "req-1".to_owned(),
        }
    }

    #[test]
    fn builds_the_vendor_request() {
        let body = json!({"model": "gpt-client", "messages": [{"role": "user", "content": "hi"}]});
        let sent = translate_request(&ctx(false), body.to_string().as_bytes()).unwrap();
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.path, "/chat/completions");
        assert_eq!(sent.headers.len(), 1);
        assert_eq!(sent.headers[0].name, "content-type");
        assert_eq!(sent.headers[0].value, "application/json");
        assert_eq!(sent.state, "");
        let sent_body: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(
            sent_body,
            json!({"model": "gpt-upstream", "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn streamed_requests_ask_for_usage_and_remember_the_client() {
        let body = json!({"model": "gpt-client", "messages": [], "stream": true,
                          "stream_options": {"include_usage": true}});
        let sent = translate_request(&ctx(true), body.to_string().as_bytes()).unwrap();
        assert_eq!(sent.state, "usage");
        let body = json!({"model": "gpt-client", "messages": [], "stream": true});
        let sent = translate_request(&ctx(true), body.to_string().as_bytes()).unwrap();
        assert_eq!(sent.state, "");
        let sent_body: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(sent_body["stream_options"]["include_usage"], json!(true));
    }

    #[test]
    fn refuses_bad_bodies_and_other_protocols() {
        assert!(matches!(
            translate_request(&ctx(false), b"[]"),
            Err(PluginError::InvalidRequest(_))
        ));
        let mut other = ctx(false);
        other.client_protocol = Protocol::AnthropicMessages;
        assert!(matches!(
            translate_request(&other, b"{}"),
            Err(PluginError::Unsupported(_))
        ));
    }
}
