//! The model lists: `GET /v1/models` (spec §4.1) and `GET /v1/models/{model}`
//! in OpenAI's shape, and
//! `GET /v1beta/models` / `GET /v1beta/models/{model}` in Gemini's, for the
//! Google SDK's `models.list()` and `models.get()`.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::{Catalog, Listed, SharedState};
use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

/// The models this caller may use and someone serves, in `catalog`.
fn enabled<'a>(catalog: &'a Catalog, caller: &'a Caller) -> impl Iterator<Item = &'a Listed> {
    catalog.listed.iter().filter(move |m| {
        // A model nobody serves is not enabled in any useful sense.
        let served = match catalog.video_models.get(&m.id) {
            Some(v) => !catalog.channels(v.concrete()).is_empty(),
            None => !catalog.channels(&m.id).is_empty(),
        };
        served && caller.check_model(&m.id).is_ok()
    })
}

fn openai_model(m: &Listed) -> Value {
    json!({ "id": m.id, "object": "model", "created": m.created, "owned_by": m.owned_by })
}

pub async fn list(State(state): State<SharedState>, caller: Caller) -> Json<Value> {
    let catalog = state.catalog();
    let data: Vec<Value> = enabled(&catalog, &caller).map(openai_model).collect();
    Json(json!({ "object": "list", "data": data }))
}

/// `GET /v1/models/{model}`: the openai SDK's `models.retrieve()`.
pub async fn retrieve(
    State(state): State<SharedState>,
    caller: Caller,
    Path(model): Path<String>,
) -> Result<Json<Value>, ApiError> {
    enabled(&state.catalog(), &caller)
        .find(|m| m.id == model)
        .map(|m| Json(openai_model(m)))
        .ok_or(ApiError::ModelNotFound(model))
}

fn gemini_model(id: &str) -> Value {
    json!({
        "name": format!("models/{id}"),
        "version": "001",
        "displayName": id,
        "description": format!("{id}, served by the gateway"),
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent"],
    })
}

/// Text models only: the Gemini protocol has no video generation here.
pub async fn gemini_list(State(state): State<SharedState>, caller: Caller) -> Json<Value> {
    let catalog = state.catalog();
    let models: Vec<Value> = enabled(&catalog, &caller)
        .filter(|m| catalog.models.contains_key(&m.id))
        .map(|m| gemini_model(&m.id))
        .collect();
    Json(json!({ "models": models }))
}

pub async fn gemini_get(
    State(state): State<SharedState>,
    caller: Caller,
    Path(model): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = model.strip_prefix("models/").unwrap_or(&model);
    let catalog = state.catalog();
    let found = enabled(&catalog, &caller)
        .find(|m| m.id == id && catalog.models.contains_key(&m.id))
        .map(|m| Json(gemini_model(&m.id)));
    found.ok_or_else(|| ApiError::ModelNotFound(id.to_string()))
}
