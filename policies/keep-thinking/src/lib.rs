//! The `keep-thinking` policy: for a model whose thinking phase cannot be
//! switched off (spec §4.3), the switches that would ask for that are removed
//! so the upstream neither rejects the call nor is asked for the impossible.

mod rewrite;

wit_bindgen::generate!({
    path: "../../wit",
    world: "model-policy",
});

use exports::gateway::plugin::policy::{Guest, PatchOp, PluginError, PolicyDescriptor, RequestCtx};

struct KeepThinking;

impl Guest for KeepThinking {
    fn describe() -> PolicyDescriptor {
        PolicyDescriptor {
            name: "keep-thinking".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            summary: "removes requests to switch thinking off, for models that always think"
                .to_owned(),
        }
    }

    fn rewrite_request(_ctx: RequestCtx, body: Vec<u8>) -> Result<Vec<PatchOp>, PluginError> {
        rewrite::rewrite(&body)
    }
}

export!(KeepThinking);
