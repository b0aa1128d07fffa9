//! The `gemini` vendor adapter: every chat client protocol to a Gemini
//! generateContent vendor (`POST /{api_version}/models/{model}:generateContent`,
//! or `:streamGenerateContent?alt=sse`, under the channel's base URL, which
//! is the API root; the key goes in `x-goog-api-key`).
//!
//! Gemini clients get a passthrough (the body as sent, the model in the
//! URL); the other protocols are translated by the SDK's driver. Embeddings
//! in either spelling go to `:embedContent` or `:batchEmbedContents`.
//!
//! Channel options: `api_version`, default `v1beta`.

use gateway_guest_sdk::bindings::types::{AuthScheme, Protocol, RequestCtx};
use gateway_guest_sdk::vendor::{option, CHAT_AND_EMBEDDINGS};
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

struct Gemini;

/// A model or version name that is safe as one path segment.
fn segment(what: &str, s: &str) -> Result<(), TranslateError> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(TranslateError::invalid(format!(
            "{what} `{}` cannot be used in a Gemini URL",
            s.escape_debug()
        )))
    }
}

impl Vendor for Gemini {
    fn info() -> VendorInfo {
        VendorInfo::new(
            "gemini",
            env!("CARGO_PKG_VERSION"),
            Protocol::Gemini,
            AuthScheme::XGoogApiKey,
        )
        .serving(CHAT_AND_EMBEDDINGS)
    }

    fn path(ctx: &RequestCtx) -> Result<String, TranslateError> {
        model_url(
            ctx,
            if ctx.stream {
                "streamGenerateContent?alt=sse"
            } else {
                "generateContent"
            },
        )
    }

    fn family_dialect(_client: Protocol) -> Protocol {
        Protocol::GeminiEmbeddings
    }

    fn family_path(
        ctx: &RequestCtx,
        _dialect: Protocol,
        batch: bool,
    ) -> Result<String, TranslateError> {
        model_url(
            ctx,
            if batch {
                "batchEmbedContents"
            } else {
                "embedContent"
            },
        )
    }
}

/// `/{api_version}/models/{model}:{action}`.
fn model_url(ctx: &RequestCtx, action: &str) -> Result<String, TranslateError> {
    let version = option(ctx, "api_version").unwrap_or("v1beta");
    let model = ctx
        .upstream_model
        .strip_prefix("models/")
        .unwrap_or(&ctx.upstream_model);
    segment("the API version", version)?;
    segment("the model", model)?;
    Ok(format!("/{version}/models/{model}:{action}"))
}

gateway_guest_sdk::export_adapter!(Gemini);

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_guest_sdk::bindings::types::Setting;

    fn ctx(model: &str, stream: bool, version: Option<&str>) -> RequestCtx {
        RequestCtx {
            client_protocol: Protocol::OpenaiChat,
            model: "c".into(),
            upstream_model: model.into(),
            stream,
            request_id: "r".into(),
            client_headers: vec![],
            channel_options: version
                .map(|v| {
                    vec![Setting {
                        key: "api_version".into(),
                        value: v.into(),
                    }]
                })
                .unwrap_or_default(),
        }
    }

    #[test]
    fn paths() {
        assert_eq!(
            Gemini::path(&ctx("gemini-2.5-flash", false, None)).unwrap(),
            "/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            Gemini::path(&ctx("models/g", true, Some("v1"))).unwrap(),
            "/v1/models/g:streamGenerateContent?alt=sse"
        );
        assert!(Gemini::path(&ctx("../evil", false, None)).is_err());
        assert_eq!(
            Gemini::family_path(
                &ctx("text-embedding-004", false, None),
                Protocol::GeminiEmbeddings,
                true
            )
            .unwrap(),
            "/v1beta/models/text-embedding-004:batchEmbedContents"
        );
        assert!(Gemini::path(&ctx("g", false, Some("v1/x"))).is_err());
    }
}
