//! Model policies: a [`Policy`] reads the vendor request (already translated
//! into the channel adapter's dialect) and returns edits; the host audits and
//! applies them. [`crate::export_policy!`] does the WIT glue.

use std::marker::PhantomData;

use serde_json::Value;

use crate::bindings::policy::exports::gateway::plugin::policy::{
    Guest, JsonSet, PatchOp, PolicyDescriptor,
};
use crate::bindings::types::{PluginError, Protocol, RequestCtx};
use crate::driver::plugin_error;
use crate::json::parse_request_object;
use crate::TranslateError;

/// One edit of the vendor request body, at an RFC 6901 JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Remove the member, if present.
    Remove(String),
    /// Set the member to this JSON value.
    Set(String, Value),
    /// Set the member only when it is absent.
    SetIfAbsent(String, Value),
}

/// What `describe` reports.
pub struct PolicyInfo {
    pub name: &'static str,
    pub version: &'static str,
    pub summary: &'static str,
}

pub trait Policy: 'static {
    fn info() -> PolicyInfo;

    /// The edits for a vendor request `body` written in `vendor` (a JSON
    /// object; the SDK has checked that).
    fn rewrite(
        ctx: &RequestCtx,
        vendor: Protocol,
        body: &Value,
    ) -> Result<Vec<Edit>, TranslateError>;
}

/// The policy `P` as the `policy` interface.
pub struct PolicyDriver<P>(PhantomData<P>);

fn patch_op(edit: Edit) -> PatchOp {
    match edit {
        Edit::Remove(pointer) => PatchOp::Remove(pointer),
        Edit::Set(pointer, value) => PatchOp::Set(JsonSet {
            pointer,
            value: value.to_string(),
        }),
        Edit::SetIfAbsent(pointer, value) => PatchOp::SetIfAbsent(JsonSet {
            pointer,
            value: value.to_string(),
        }),
    }
}

impl<P: Policy> Guest for PolicyDriver<P> {
    fn describe() -> PolicyDescriptor {
        let info = P::info();
        PolicyDescriptor {
            name: info.name.to_owned(),
            version: info.version.to_owned(),
            summary: info.summary.to_owned(),
        }
    }

    fn rewrite_request(
        ctx: RequestCtx,
        vendor_protocol: Protocol,
        body: Vec<u8>,
    ) -> Result<Vec<PatchOp>, PluginError> {
        let value = parse_request_object(&body).map_err(plugin_error)?;
        let edits = P::rewrite(&ctx, vendor_protocol, &value).map_err(plugin_error)?;
        Ok(edits.into_iter().map(patch_op).collect())
    }
}

/// Exports `PolicyDriver<$policy>` as this component's `policy` interface.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        type __GatewayPolicyDriver = $crate::policy::PolicyDriver<$policy>;
        $crate::bindings::policy::export_model_policy!(
            __GatewayPolicyDriver with_types_in $crate::bindings::policy
        );
    };
}
