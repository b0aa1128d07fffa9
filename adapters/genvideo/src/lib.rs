//! The `genvideo` video adapter: the host's video tasks on a `genvideo-v1`
//! vendor (`POST /video/tasks`, `GET /video/tasks/{id}`,
//! `GET /video/tasks/{id}/content` under the channel's `/v1` base URL).
//!
//! This file is the glue; the requests and readings live in plain
//! functions that are tested natively.

mod paths;
mod poll;
mod submit;

use gateway_guest_sdk::log;
use gateway_guest_sdk::video::{
    AuthScheme, Descriptor, PluginError, Protocol, TaskStatus, UpstreamRequest, VideoRequest,
    VideoVendor,
};

struct GenVideoAdapter;

impl VideoVendor for GenVideoAdapter {
    fn describe() -> Descriptor {
        Descriptor {
            name: "genvideo".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            vendor_protocol: Protocol::VideoTasks,
            client_protocols: Vec::new(),
            auth: AuthScheme::Bearer,
        }
    }

    fn build_submit(req: VideoRequest) -> Result<UpstreamRequest, PluginError> {
        logged(log::debug, "submission refused", submit::build_submit(&req))
    }

    fn parse_submit(status: u16, body: Vec<u8>) -> Result<String, PluginError> {
        logged(
            log::warn,
            "submission failed",
            submit::parse_submit(status, &body),
        )
    }

    fn build_poll(upstream_task_id: String) -> Result<UpstreamRequest, PluginError> {
        logged(
            log::warn,
            "poll refused",
            poll::build_poll(&upstream_task_id),
        )
    }

    fn parse_poll(status: u16, body: Vec<u8>) -> Result<TaskStatus, PluginError> {
        logged(
            log::warn,
            "unreadable poll answer",
            poll::parse_poll(status, &body),
        )
    }

    fn build_content(upstream_task_id: String) -> Result<UpstreamRequest, PluginError> {
        logged(
            log::warn,
            "download refused",
            poll::build_content(&upstream_task_id),
        )
    }
}

/// Logs a failed translation; messages never hold credentials (vendor text
/// is cleaned before it gets into one).
fn logged<T>(
    level: fn(&str),
    what: &str,
    result: Result<T, PluginError>,
) -> Result<T, PluginError> {
    if let Err(err) = &result {
        let m = match err {
            PluginError::InvalidRequest(m)
            | PluginError::Unsupported(m)
            | PluginError::UpstreamFormat(m) => m,
            PluginError::UpstreamFailed(e) => &e.message,
        };
        level(&format!("{what}: {m}"));
    }
    result
}

gateway_guest_sdk::export_video_adapter!(GenVideoAdapter);
