//! The model lists: `GET /v1/models` (spec §4.1) and `GET /v1/models/{model}`
//! in OpenAI's shape, and
//! `GET /v1beta/models` / `GET /v1beta/models/{model}` in Gemini's, for the
//! Google SDK's `models.list()` and `models.get()`.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::{Catalog, Listed, SharedState};
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// A model entry (spec §2.6).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Model {
    #[schema(example = "gpt-4o-mini")]
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// The model's `created` from the config, else when this gateway first
    /// served it (Unix seconds).
    pub created: i64,
    pub owned_by: String,
}

/// The list wrapper of `GET /v1/models`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<Model>,
}

/// A model in the Gemini protocol's shape.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeminiModel {
    /// `models/NAME`.
    #[schema(example = "models/gemini-2.5-flash")]
    pub name: String,
    pub version: &'static str,
    pub display_name: String,
    pub description: String,
    pub supported_generation_methods: Vec<&'static str>,
}

/// The answer of `GET /v1beta/models`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GeminiModelList {
    pub models: Vec<GeminiModel>,
}

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

fn openai_model(m: &Listed) -> Model {
    Model {
        id: m.id.clone(),
        object: "model",
        created: m.created,
        owned_by: m.owned_by.clone(),
    }
}

pub async fn list(State(state): State<SharedState>, caller: Caller) -> Json<ModelList> {
    let catalog = state.catalog();
    let data = enabled(&catalog, &caller).map(openai_model).collect();
    Json(ModelList {
        object: "list",
        data,
    })
}

/// `GET /v1/models/{model}`: the openai SDK's `models.retrieve()`.
pub async fn retrieve(
    State(state): State<SharedState>,
    caller: Caller,
    Path(model): Path<String>,
) -> Result<Json<Model>, ApiError> {
    enabled(&state.catalog(), &caller)
        .find(|m| m.id == model)
        .map(|m| Json(openai_model(m)))
        .ok_or(ApiError::ModelNotFound(model))
}

fn gemini_model(id: &str) -> GeminiModel {
    GeminiModel {
        name: format!("models/{id}"),
        version: "001",
        display_name: id.to_string(),
        description: format!("{id}, served by the gateway"),
        supported_generation_methods: vec!["generateContent", "streamGenerateContent"],
    }
}

/// Text models only: the Gemini protocol has no video generation here.
pub async fn gemini_list(
    State(state): State<SharedState>,
    caller: Caller,
) -> Json<GeminiModelList> {
    let catalog = state.catalog();
    let models = enabled(&catalog, &caller)
        .filter(|m| catalog.models.contains_key(&m.id))
        .map(|m| gemini_model(&m.id))
        .collect();
    Json(GeminiModelList { models })
}

pub async fn gemini_get(
    State(state): State<SharedState>,
    caller: Caller,
    Path(model): Path<String>,
) -> Result<Json<GeminiModel>, ApiError> {
    let id = model.strip_prefix("models/").unwrap_or(&model);
    let catalog = state.catalog();
    let found = enabled(&catalog, &caller)
        .find(|m| m.id == id && catalog.models.contains_key(&m.id))
        .map(|m| Json(gemini_model(&m.id)));
    found.ok_or_else(|| ApiError::ModelNotFound(id.to_string()))
}
