//! `GET /v1/models` (spec §4.1): the models enabled for this caller.

use crate::auth::Caller;
use crate::state::SharedState;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

pub async fn list(State(state): State<SharedState>, caller: Caller) -> Json<Value> {
    let catalog = &state.catalog;
    let data: Vec<Value> = catalog
        .listed
        .iter()
        .filter(|(id, _)| {
            // A model nobody serves is not enabled in any useful sense.
            let served = match catalog.video_models.get(id) {
                Some(v) => !catalog.channels(v.concrete()).is_empty(),
                None => !catalog.channels(id).is_empty(),
            };
            served && caller.check_model(id).is_ok()
        })
        .map(|(id, owner)| json!({ "id": id, "object": "model", "created": 0, "owned_by": owner }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}
