//! Getting a client's call to a vendor and the answer back: channel choice
//! and failover, upstream HTTP, streaming.

pub(crate) mod alike;
pub mod charge;
pub mod driven;
pub mod form;
pub mod health;
pub mod relayed;
pub(crate) mod splice;
pub mod stream;
pub mod text;
mod typed_text;
pub mod upstream;
pub mod vendor;
