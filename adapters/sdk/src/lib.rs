//! What every gateway guest needs, so a vendor adapter only writes
//! canonical ⇄ vendor.
//!
//! Everything here is a pure function on bytes or `serde_json` values: the
//! crate knows nothing of WIT, which keeps it testable natively and usable from
//! any world. Adapters convert its plain types to the generated WIT types in a
//! thin glue layer.
//!
//! - [`canonical`]: vendor-neutral chat request, response, stream and usage types.
//! - [`openai_chat`]: the OpenAI chat-completions codec (canonical ⇄ JSON).
//! - [`openai_passthrough`]: the hot path for OpenAI-compatible vendors when
//!   the client already speaks OpenAI chat (only the model is renamed).
//! - [`errors`]: vendor error answers mapped to the host's error terms.
//! - [`redact`]: keeps vendor text safe and short before it reaches a client.
//! - [`json`]: small helpers on `serde_json` values.
//! - [`TranslateError`]: why a translation failed, mirroring WIT's `plugin-error`.

pub mod canonical;
pub mod errors;
pub mod json;
pub mod openai_chat;
pub mod openai_passthrough;
pub mod redact;
mod translate_error;

pub use translate_error::TranslateError;
