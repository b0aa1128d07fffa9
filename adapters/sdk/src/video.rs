//! Video adapters implement the `video-adapter` interface directly (it is
//! already small and vendor-shaped); this module re-exports its types and
//! [`crate::export_video_adapter!`] does the glue.

pub use crate::bindings::types::{AnswerMode, RequestBody, UpstreamRequest};
pub use crate::bindings::types::{AuthScheme, Descriptor, Header, PluginError, Protocol};
pub use crate::bindings::video::exports::gateway::plugin::video_adapter::{
    Guest as VideoVendor, TaskState, TaskStatus, VideoRequest,
};

/// Exports `$adapter` (a [`VideoVendor`]) as this component's
/// `video-adapter` interface.
#[macro_export]
macro_rules! export_video_adapter {
    ($adapter:ident) => {
        $crate::bindings::video::export_video_vendor!(
            $adapter with_types_in $crate::bindings::video
        );
    };
}
