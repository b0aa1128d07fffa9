//! The `drop-sampling` policy: for a model whose upstream rejects
//! `temperature` and `top_p`, the gateway ignores them instead of letting the
//! call fail with 400 (spec §4.3).

mod rewrite;

wit_bindgen::generate!({
    path: "../../wit",
    world: "model-policy",
});

use exports::gateway::plugin::policy::{Guest, PatchOp, PluginError, PolicyDescriptor, RequestCtx};

struct DropSampling;

impl Guest for DropSampling {
    fn describe() -> PolicyDescriptor {
        PolicyDescriptor {
            name: "drop-sampling".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            summary: "drops temperature and top_p for upstreams that reject them".to_owned(),
        }
    }

    fn rewrite_request(_ctx: RequestCtx, body: Vec<u8>) -> Result<Vec<PatchOp>, PluginError> {
        rewrite::rewrite(&body)
    }
}

export!(DropSampling);
