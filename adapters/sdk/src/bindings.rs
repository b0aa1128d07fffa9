//! The WIT bindings, generated once here for every world so that no guest
//! repeats them. Each world's export macro is public; guests never call
//! these macros directly but go through [`crate::export_adapter!`],
//! [`crate::export_policy!`] and [`crate::export_video_adapter!`].
//!
//! The shared `types` and `log` interfaces are generated with the adapter
//! world and reused by the others, so a `Protocol` or `Header` is one Rust
//! type whichever world a guest exports.

#![allow(missing_docs, clippy::all)]

pub mod adapter {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "vendor-adapter",
        pub_export_macro: true,
        export_macro_name: "export_vendor_adapter",
        default_bindings_module: "gateway_guest_sdk::bindings::adapter",
        additional_derives: [PartialEq],
    });
}

pub mod video {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "video-vendor",
        pub_export_macro: true,
        export_macro_name: "export_video_vendor",
        default_bindings_module: "gateway_guest_sdk::bindings::video",
        with: {
            "gateway:plugin/types@0.2.0": crate::bindings::adapter::gateway::plugin::types,
            "gateway:plugin/log@0.2.0": crate::bindings::adapter::gateway::plugin::log,
        },
    });
}

pub mod policy {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "model-policy",
        pub_export_macro: true,
        export_macro_name: "export_model_policy",
        default_bindings_module: "gateway_guest_sdk::bindings::policy",
        with: {
            "gateway:plugin/types@0.2.0": crate::bindings::adapter::gateway::plugin::types,
            "gateway:plugin/log@0.2.0": crate::bindings::adapter::gateway::plugin::log,
        },
    });
}

pub use adapter::gateway::plugin::types;
