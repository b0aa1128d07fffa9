//! A starting point for a vendor adapter. Copy this folder, rename the crate
//! and `NAME`, and change what differs for your vendor; the README's
//! "Writing an adapter" walks through it, up to a passing
//! `gateway adapter test` and the `.wasm` in a running gateway.
//!
//! As it stands it is a working adapter for an OpenAI-compatible chat vendor
//! that wants one extra header. Everything a vendor adapter must say is here:
//!
//! - [`Vendor::info`]: the adapter's name (channels refer to it), the
//!   protocol the vendor speaks (the SDK's driver then translates every
//!   client protocol to it, or passes the same protocol through), and how the
//!   host presents the channel's key (the adapter never sees the key);
//! - [`Vendor::path`]: the endpoint under the channel's base URL;
//! - [`Vendor::headers`]: anything else the vendor wants in the request;
//! - [`Vendor::map_error`] (optional): the vendor's error answers in gateway
//!   terms, when its error shape or status codes are unusual.

use gateway_guest_sdk::bindings::types::{AuthScheme, Header, Protocol, RequestCtx};
use gateway_guest_sdk::errors::{map_vendor_error, UpstreamFailure};
use gateway_guest_sdk::vendor::{header, option};
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

/// Channels say `adapter = "template"`.
const NAME: &str = "template";

struct Template;

impl Vendor for Template {
    fn info() -> VendorInfo {
        VendorInfo::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            Protocol::OpenaiChat,
            AuthScheme::Bearer,
        )
    }

    fn path(_ctx: &RequestCtx) -> Result<String, TranslateError> {
        Ok("/chat/completions".to_owned())
    }

    /// An example of a per-channel option: `options = { tenant = "acme" }`
    /// in the channel's config becomes an `x-tenant` header.
    fn headers(ctx: &RequestCtx) -> Vec<Header> {
        option(ctx, "tenant")
            .map(|t| vec![header("x-tenant", t)])
            .unwrap_or_default()
    }

    /// An example of a vendor quirk: this vendor says 409 when it is busy,
    /// which another channel may not be.
    fn map_error(status: u16, headers: &[Header], body: &[u8]) -> UpstreamFailure {
        let mut failure = map_vendor_error(Protocol::OpenaiChat, status, headers, body);
        if status == 409 {
            failure.status = 503;
            failure.retryable = true;
        }
        failure
    }
}

gateway_guest_sdk::export_adapter!(Template);
