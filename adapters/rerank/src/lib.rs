//! The `rerank` vendor adapter: `POST /v1/rerank` to a Jina / Cohere-style
//! rerank API (`query`, `documents`, `top_n`, `return_documents`; answer
//! `results[]` with `index` and `relevance_score`). The call is a
//! passthrough with the model renamed; it is billed by the vendor's search
//! units (Cohere's `meta.billed_units`, else one per 100 documents) and the
//! tokens it reports (Jina's `usage.total_tokens`), each at the model's price.
//!
//! Channel options: `path`, the endpoint under the base URL, default
//! `/rerank` (Jina: base `https://api.jina.ai/v1`; Cohere: base
//! `https://api.cohere.com` with `path = "/v2/rerank"`).

use gateway_guest_sdk::bindings::types::{AuthScheme, Protocol, RequestCtx};
use gateway_guest_sdk::vendor::option;
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

struct Rerank;

impl Vendor for Rerank {
    fn info() -> VendorInfo {
        VendorInfo::new(
            "rerank",
            env!("CARGO_PKG_VERSION"),
            Protocol::Rerank,
            AuthScheme::Bearer,
        )
        .serving(&[Protocol::Rerank])
    }

    fn path(_ctx: &RequestCtx) -> Result<String, TranslateError> {
        Err(TranslateError::unsupported(
            "the rerank adapter serves only /v1/rerank",
        ))
    }

    fn family_path(
        ctx: &RequestCtx,
        _dialect: Protocol,
        _batch: bool,
    ) -> Result<String, TranslateError> {
        match option(ctx, "path") {
            Some(p) if p.starts_with('/') && !p.contains("..") => Ok(p.to_owned()),
            Some(p) => Err(TranslateError::invalid(format!(
                "the channel option `path` must start with `/`: `{p}`"
            ))),
            None => Ok("/rerank".to_owned()),
        }
    }
}

gateway_guest_sdk::export_adapter!(Rerank);
