//! The gateway: one base URL and one token scheme in front of many AI vendors,
//! with every vendor translation in a sandboxed WebAssembly component.
//!
//! Where things are decided:
//! - `config`: the TOML file, checked. `server`: assembly and listeners.
//! - `api`: routes, middleware, the admin API. `error`: every client-visible
//!   error, in each client protocol's envelope. `protocol`: the client
//!   protocols, one table row each (routes, head, key, envelope).
//! - `auth`: keys and token controls. `limits`: rate and concurrency limits.
//! - `billing`: prices, quota arithmetic, holds. `store`: durable state (redb).
//! - `plugins`: the wasmtime sandbox, component registry, guest calls.
//! - `relay`: channels, failover, upstream HTTP, streaming. `sse`: SSE framing.
//!   `run_to_end`: a call its client's hang-up cannot cancel.
//! - `video`: the asynchronous video API. `webhooks`: its signed, durable callbacks.
//! - `reload`: the catalog re-read from the config file while serving.
//! - `metrics`: Prometheus series. `telemetry`: OpenTelemetry spans.
//! - `clock`: injectable time. `adapter_kit`: `gateway adapter test`.

pub mod adapter_kit;
pub mod admin_cli;
pub mod api;
pub mod auth;
pub mod billing;
pub mod clock;
pub mod config;
pub mod console;
pub mod edge;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod ids;
pub mod limits;
pub mod metrics;
pub mod plugins;
pub mod protocol;
pub mod relay;
pub mod reload;
pub mod retention;
pub mod run_to_end;
pub mod server;
pub mod sse;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod video;
pub mod webhooks;
