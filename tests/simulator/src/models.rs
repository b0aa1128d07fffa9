//! `GET /v1/models`: the fixed catalogue of simulated models.

use axum::Json;
use serde_json::{json, Value};

pub const MODELS: [&str; 2] = ["sim-chat", "sim-reasoner"];

pub async fn list() -> Json<Value> {
    let data: Vec<Value> = MODELS
        .iter()
        .map(|id| json!({ "id": id, "object": "model", "owned_by": "sim" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}
