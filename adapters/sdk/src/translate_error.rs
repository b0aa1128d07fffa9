use std::fmt;

use crate::errors::UpstreamFailure;

/// Why a guest could not translate. Mirrors WIT's `plugin-error` so adapters
/// map it one to one; kept separate so this crate needs no generated bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranslateError {
    /// The client's request is invalid for this vendor (the host answers 400).
    InvalidRequest(String),
    /// The request uses something the adapter does not support (400).
    Unsupported(String),
    /// The vendor answered something the adapter cannot read (502).
    UpstreamFormat(String),
    /// The vendor reported a failure inside a 2xx answer (an error event in
    /// its stream, an error body with status 200).
    Vendor(UpstreamFailure),
}

impl TranslateError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidRequest(message.into())
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported(message.into())
    }

    pub fn upstream(message: impl Into<String>) -> Self {
        Self::UpstreamFormat(message.into())
    }

    pub fn message(&self) -> &str {
        match self {
            Self::InvalidRequest(m) | Self::Unsupported(m) | Self::UpstreamFormat(m) => m,
            Self::Vendor(f) => &f.message,
        }
    }
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Self::InvalidRequest(_) => "invalid request",
            Self::Unsupported(_) => "unsupported",
            Self::UpstreamFormat(_) => "upstream format",
            Self::Vendor(_) => "vendor failure",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for TranslateError {}
