//! The `openai` vendor adapter: every chat client protocol to any
//! OpenAI-compatible chat-completions vendor (`POST /chat/completions` under
//! the channel's base URL, which ends in `/v1`), and the OpenAI-style
//! endpoint families: embeddings (both spellings), images, speech,
//! transcription and moderation, at their OpenAI paths.
//!
//! OpenAI chat clients get a passthrough (model renamed, usage read); the
//! other protocols are translated by the SDK's driver.
//!
//! Channel options: `api_version` adds `?api-version=...` to the path, as
//! Azure OpenAI deployments want.

use gateway_guest_sdk::bindings::types::{AuthScheme, Protocol, RequestCtx};
use gateway_guest_sdk::vendor::{openai_family_path, option, CHAT_AND_OPENAI_FAMILIES};
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

struct OpenAi;

impl Vendor for OpenAi {
    fn info() -> VendorInfo {
        VendorInfo::new(
            "openai",
            env!("CARGO_PKG_VERSION"),
            Protocol::OpenaiChat,
            AuthScheme::Bearer,
        )
        .serving(CHAT_AND_OPENAI_FAMILIES)
    }

    fn path(ctx: &RequestCtx) -> Result<String, TranslateError> {
        Ok(with_version(ctx, "/chat/completions".to_owned()))
    }

    fn family_path(
        ctx: &RequestCtx,
        dialect: Protocol,
        _batch: bool,
    ) -> Result<String, TranslateError> {
        Ok(with_version(ctx, openai_family_path(dialect)?))
    }
}

/// The path with `?api-version=` when the channel sets `api_version`.
fn with_version(ctx: &RequestCtx, path: String) -> String {
    match option(ctx, "api_version") {
        Some(v) => format!("{path}?api-version={v}"),
        None => path,
    }
}

gateway_guest_sdk::export_adapter!(OpenAi);
