//! Host-side bindings generated from `wit/plugin.wit`, one module per world.
//! The shared `types` and `log` interfaces are generated once (with the
//! adapter world) and reused by the others, so a `Usage` or `Header` is the
//! same Rust type whichever world produced it.

pub mod adapter {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "vendor-adapter",
        exports: { default: async },
    });
}

pub mod video {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "video-vendor",
        exports: { default: async },
        with: {
            "gateway:plugin/types": super::adapter::gateway::plugin::types,
            "gateway:plugin/log": super::adapter::gateway::plugin::log,
        },
    });
}

pub mod policy {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "model-policy",
        exports: { default: async },
        with: {
            "gateway:plugin/types": super::adapter::gateway::plugin::types,
            "gateway:plugin/log": super::adapter::gateway::plugin::log,
        },
    });
}

pub use adapter::gateway::plugin::types;
