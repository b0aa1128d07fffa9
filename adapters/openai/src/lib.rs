//! The `openai` vendor adapter: every chat client protocol to any
//! OpenAI-compatible chat-completions vendor (`POST /chat/completions` under
//! the channel's base URL, which ends in `/v1`).
//!
//! OpenAI chat clients get a passthrough (model renamed, usage read); the
//! other protocols are translated by the SDK's driver.
//!
//! Channel options: `api_version` adds `?api-version=...` to the path, as
//! Azure OpenAI deployments want.

use gateway_guest_sdk::bindings::types::{AuthScheme, Protocol, RequestCtx};
use gateway_guest_sdk::vendor::option;
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
    }

    fn path(ctx: &RequestCtx) -> Result<String, TranslateError> {
        Ok(match option(ctx, "api_version") {
            Some(v) => format!("/chat/completions?api-version={v}"),
            None => "/chat/completions".to_owned(),
        })
    }
}

gateway_guest_sdk::export_adapter!(OpenAi);
