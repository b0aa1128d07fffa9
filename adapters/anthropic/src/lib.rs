//! The `anthropic` vendor adapter: every chat client protocol to an
//! Anthropic Messages vendor (`POST /messages` under the channel's base URL,
//! which ends in `/v1`; the key goes in `x-api-key`).
//!
//! Anthropic clients get a passthrough (model renamed, usage read); the other
//! protocols are translated by the SDK's driver.
//!
//! Channel options:
//! - `version`: the `anthropic-version` header when the client sends none
//!   (an Anthropic client's own header is passed on); default `2023-06-01`.
//! - `beta`: an `anthropic-beta` value to send (an Anthropic client's own is
//!   passed on as well).
//! - `default_max_tokens`: the output cap when the client gave none (the
//!   Messages API requires one); default 4096.

use gateway_guest_sdk::bindings::types::{AuthScheme, Header, Protocol, RequestCtx};
use gateway_guest_sdk::vendor::{client_header, header, option};
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

/// The `anthropic-version` sent when neither the client nor the channel says.
const DEFAULT_VERSION: &str = "2023-06-01";

struct Anthropic;

impl Vendor for Anthropic {
    fn info() -> VendorInfo {
        VendorInfo::new(
            "anthropic",
            env!("CARGO_PKG_VERSION"),
            Protocol::AnthropicMessages,
            AuthScheme::XApiKey,
        )
    }

    fn path(_ctx: &RequestCtx) -> Result<String, TranslateError> {
        Ok("/messages".to_owned())
    }

    fn headers(ctx: &RequestCtx) -> Vec<Header> {
        let from_client = |name| {
            (ctx.client_protocol == Protocol::AnthropicMessages)
                .then(|| client_header(ctx, name))
                .flatten()
        };
        let version = from_client("anthropic-version")
            .or_else(|| option(ctx, "version"))
            .unwrap_or(DEFAULT_VERSION);
        let mut headers = vec![header("anthropic-version", version)];
        let betas: Vec<&str> = [from_client("anthropic-beta"), option(ctx, "beta")]
            .into_iter()
            .flatten()
            .collect();
        if !betas.is_empty() {
            headers.push(header("anthropic-beta", betas.join(",")));
        }
        headers
    }
}

gateway_guest_sdk::export_adapter!(Anthropic);

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_guest_sdk::bindings::types::Setting;

    fn ctx(client: Protocol, headers: &[(&str, &str)], options: &[(&str, &str)]) -> RequestCtx {
        RequestCtx {
            client_protocol: client,
            model: "c".into(),
            upstream_model: "u".into(),
            stream: false,
            request_id: "r".into(),
            client_headers: headers.iter().map(|(n, v)| header(n, *v)).collect(),
            channel_options: options
                .iter()
                .map(|(k, v)| Setting {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
        }
    }

    fn names(h: Vec<Header>) -> Vec<(String, String)> {
        h.into_iter().map(|h| (h.name, h.value)).collect()
    }

    #[test]
    fn version_from_the_client_then_the_channel_then_the_default() {
        let anthropic = ctx(
            Protocol::AnthropicMessages,
            &[
                ("anthropic-version", "2026-10-21"),
                ("anthropic-beta", "x-1"),
            ],
            &[("beta", "y-2")],
        );
        assert_eq!(
            names(Anthropic::headers(&anthropic)),
            [
                ("anthropic-version".into(), "2026-10-21".into()),
                ("anthropic-beta".into(), "x-1,y-2".into())
            ]
        );
        // Another protocol's client headers are not Anthropic's to pass on.
        let openai = ctx(
            Protocol::OpenaiChat,
            &[("anthropic-version", "bogus")],
            &[("version", "2024-01-01")],
        );
        assert_eq!(
            names(Anthropic::headers(&openai)),
            [("anthropic-version".into(), "2024-01-01".into())]
        );
        let plain = ctx(Protocol::Gemini, &[], &[]);
        assert_eq!(names(Anthropic::headers(&plain))[0].1, DEFAULT_VERSION);
    }
}
