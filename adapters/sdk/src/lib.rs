//! The gateway's guest SDK: what every WebAssembly guest needs, so a vendor
//! adapter is a small [`Vendor`] implementation and one macro.
//!
//! - [`bindings`]: the WIT bindings for every world (generated once, here).
//! - [`vendor`], [`driver`], [`export_adapter!`]: a text adapter from a
//!   [`Vendor`]; [`policy`], [`export_policy!`]: a model policy;
//!   [`video`], [`export_video_adapter!`]: a video adapter.
//! - [`translate`]: passthrough or translation through the canonical form.
//! - [`canonical`]: the vendor-neutral chat form (ordered content blocks,
//!   faithful finish reasons, stream events, usage).
//! - One codec per protocol, each both ways (request, response, stream;
//!   parse and encode): [`openai_chat`] (with [`openai_passthrough`], its
//!   same-protocol hot path), [`openai_completions`], [`openai_responses`],
//!   [`anthropic`], [`gemini`].
//! - [`families`]: the endpoint families beside chat (embeddings in both
//!   spellings, images, speech, transcription, rerank, moderation).
//! - [`errors`]: vendor error answers mapped to the host's error terms.
//! - [`redact`]: keeps vendor text safe and short before it reaches a client.
//! - [`json`]: small helpers on `serde_json` values; [`typed`]: reading
//!   the hot shapes without the tree.
//! - [`log`]: log lines through the host.
//!
//! Everything but the bindings' exports runs natively, so the codecs are
//! unit-tested on the build machine.

pub mod anthropic;
pub mod bindings;
pub mod canonical;
pub mod driver;
pub mod errors;
pub mod families;
pub mod gemini;
pub mod json;
pub mod log;
pub mod openai_chat;
pub mod openai_completions;
pub mod openai_passthrough;
pub mod openai_responses;
pub mod policy;
pub mod redact;
pub mod translate;
mod translate_error;
pub mod typed;
pub mod vendor;
pub mod video;

pub use translate_error::TranslateError;
pub use vendor::{Vendor, VendorInfo};
