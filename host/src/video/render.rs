//! The client's view of a task (spec §2.1, §2.2) and of a quote (§2.3).
//!
//! Each view is a typed struct: the handlers serialize it, and the OpenAPI
//! document (`api::openapi`) describes it from the same type, so the answer
//! and its description cannot drift apart.

use crate::billing::money::Currency;
use crate::store::video::{Quote, TaskError, TaskStatus, VideoTask};
use serde::Serialize;
use utoipa::ToSchema;

/// The same amounts as the CNY figures, in integer quota units.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuotaSplit {
    pub reserved: i64,
    pub settled: i64,
    pub refunded: i64,
}

/// A task's `billing` object (spec §2.2): CNY figures and the same in quota
/// units.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VideoBilling {
    /// Always `CNY`.
    #[schema(example = "CNY")]
    pub currency: &'static str,
    /// CNY per second.
    pub unit_price: Option<f64>,
    /// Billed seconds: what the hold covers while the task runs, what was
    /// charged once it completed, 0 for any other ending.
    pub seconds: Option<u32>,
    pub reserved: f64,
    pub settled: f64,
    pub refunded: f64,
    pub quota: QuotaSplit,
}

/// `progress`: the integer 0 in the submission's answer, a percentage
/// string (`"40%"`) when polled.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Progress {
    Number(u8),
    Percent(String),
}

/// A video task (spec §2.1), with the `seconds` and `size` the openai SDK's
/// `Video` type reads.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VideoTaskView {
    #[schema(example = "task_0192f0c1d2e3")]
    pub id: String,
    /// Always `video`.
    pub object: &'static str,
    /// As submitted (alias or concrete name).
    pub model: String,
    pub status: TaskStatus,
    pub progress: Progress,
    pub created_at: i64,
    /// Requested seconds.
    pub requested_duration: u32,
    /// Settled seconds once `completed`, null otherwise.
    pub actual_duration: Option<u32>,
    /// The requested seconds as a string.
    pub seconds: String,
    pub size: String,
    pub prompt: String,
    pub billing: VideoBilling,
    /// Why the task ended without a video; null otherwise.
    pub error: Option<TaskError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<i64>,
    /// End of the download window (completion plus 24 hours).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quote_id: Option<String>,
}

/// `duration_limit` of a quote: the model's range in seconds.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DurationLimit {
    pub min: u32,
    pub max: u32,
}

/// A price quote (spec §2.3), valid for one submission until `expires_at`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuoteView {
    #[schema(example = "quote_0192f0c1d2e3")]
    pub quote_id: String,
    /// Always `video.quote`.
    pub object: &'static str,
    /// Always `CNY`.
    pub currency: &'static str,
    pub model: String,
    pub seconds: u32,
    /// CNY per second.
    pub unit_price: f64,
    /// Expected total, CNY.
    pub estimated_cost: f64,
    /// Quota units the submission will hold.
    pub quota: i64,
    pub duration_limit: DurationLimit,
    pub created_at: i64,
    pub expires_at: i64,
}

/// The `billing` object.
pub fn billing(t: &VideoTask, cur: &Currency) -> VideoBilling {
    // Billed seconds: what the hold covers while the task runs, what was
    // charged once it completed, nothing for any other ending.
    let billed_seconds = match t.status {
        TaskStatus::Completed => t.actual_seconds.unwrap_or(t.seconds),
        TaskStatus::Queued | TaskStatus::InProgress => t.seconds,
        TaskStatus::Failed | TaskStatus::Rejected | TaskStatus::Expired => 0,
    };
    VideoBilling {
        currency: "CNY",
        unit_price: Some(cur.to_cny(t.unit_price)),
        seconds: Some(billed_seconds),
        reserved: cur.to_cny(t.reserved),
        settled: cur.to_cny(t.settled),
        refunded: cur.to_cny(t.refunded),
        quota: QuotaSplit {
            reserved: t.reserved,
            settled: t.settled,
            refunded: t.refunded,
        },
    }
}

/// A task as the client sees it. At submission `progress` is the integer
/// 0; when polled it is a percentage string.
pub fn task(t: &VideoTask, cur: &Currency, at_submission: bool) -> VideoTaskView {
    VideoTaskView {
        id: t.id.clone(),
        object: "video",
        model: t.model.clone(),
        status: t.status,
        progress: if at_submission {
            Progress::Number(t.progress)
        } else {
            Progress::Percent(format!("{}%", t.progress))
        },
        created_at: t.created_at,
        requested_duration: t.seconds,
        actual_duration: if t.status == TaskStatus::Completed {
            t.actual_seconds
        } else {
            None
        },
        seconds: t.seconds.to_string(),
        size: t.size.clone(),
        prompt: t.prompt.clone(),
        billing: billing(t, cur),
        error: t.error.clone(),
        completed_at: t.completed_at,
        expires_at: t.expires_at,
        quote_id: t.quote_id.clone(),
    }
}

pub fn quote(q: &Quote, cur: &Currency, min: u32, max: u32) -> QuoteView {
    QuoteView {
        quote_id: q.id.clone(),
        object: "video.quote",
        currency: "CNY",
        model: q.model.clone(),
        seconds: q.seconds,
        unit_price: cur.to_cny(q.unit_price),
        estimated_cost: cur.to_cny(q.quota),
        quota: q.quota,
        duration_limit: DurationLimit { min, max },
        created_at: q.created_at,
        expires_at: q.expires_at,
    }
}
