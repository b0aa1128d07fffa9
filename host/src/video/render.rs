//! The client's view of a task (spec §2.1, §2.2) and of a quote (§2.3).

use crate::billing::money::Currency;
use crate::store::video::{Quote, TaskStatus, VideoTask};
use serde_json::{json, Value};

/// The `billing` object: CNY figures and the same in quota units.
pub fn billing(t: &VideoTask, cur: &Currency) -> Value {
    // Billed seconds: what the hold covers while the task runs, what was
    // charged once it completed, nothing for any other ending.
    let billed_seconds = match t.status {
        TaskStatus::Completed => t.actual_seconds.unwrap_or(t.seconds),
        TaskStatus::Queued | TaskStatus::InProgress => t.seconds,
        TaskStatus::Failed | TaskStatus::Rejected | TaskStatus::Expired => 0,
    };
    json!({
        "currency": "CNY",
        "unit_price": cur.to_cny(t.unit_price),
        "seconds": billed_seconds,
        "reserved": cur.to_cny(t.reserved),
        "settled": cur.to_cny(t.settled),
        "refunded": cur.to_cny(t.refunded),
        "quota": { "reserved": t.reserved, "settled": t.settled, "refunded": t.refunded },
    })
}

/// A task as JSON. At submission `progress` is the integer 0; when polled it
/// is a percentage string.
pub fn task(t: &VideoTask, cur: &Currency, at_submission: bool) -> Value {
    let progress = if at_submission {
        json!(t.progress)
    } else {
        json!(format!("{}%", t.progress))
    };
    let mut v = json!({
        "id": t.id,
        "object": "video",
        "model": t.model,
        "status": t.status.as_str(),
        "progress": progress,
        "created_at": t.created_at,
        "requested_duration": t.seconds,
        "actual_duration": if t.status == TaskStatus::Completed { json!(t.actual_seconds) } else { Value::Null },
        "seconds": t.seconds.to_string(),
        "size": t.size,
        "prompt": t.prompt,
        "billing": billing(t, cur),
        "error": t.error.as_ref().map(|e| json!({ "code": e.code, "message": e.message })),
    });
    if let Some(at) = t.completed_at {
        v["completed_at"] = json!(at);
    }
    if let Some(at) = t.expires_at {
        v["expires_at"] = json!(at);
    }
    if let Some(q) = &t.quote_id {
        v["quote_id"] = json!(q);
    }
    v
}

pub fn quote(q: &Quote, cur: &Currency, min: u32, max: u32) -> Value {
    json!({
        "quote_id": q.id,
        "object": "video.quote",
        "currency": "CNY",
        "model": q.model,
        "seconds": q.seconds,
        "unit_price": cur.to_cny(q.unit_price),
        "estimated_cost": cur.to_cny(q.quota),
        "quota": q.quota,
        "duration_limit": { "min": min, "max": max },
        "created_at": q.created_at,
        "expires_at": q.expires_at,
    })
}
