//! Typed descriptions of the protocol bodies the host does not type itself.
//!
//! The text protocols and endpoint families are translated by the guest
//! adapters; the host reads only a request's head (`protocol`) and relays the
//! rest. These types say, for the OpenAPI document, which fields a client may
//! send and what it gets back. Every protocol allows fields beyond the ones
//! named here (vendors add some every month, and the adapters pass through
//! what they do not translate), so each object carries a flattened map that
//! becomes `additionalProperties`.
//!
//! Nothing on the serving path reads these types; they are parsed only by
//! the tests that check the document's examples against them.
#![allow(dead_code)]

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// A string, or a list of strings.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum StringOrList {
    One(String),
    Many(Vec<String>),
}

/// A typed content block (`{"type": "text", "text": "..."}`, an image, a
/// tool result, ...).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ContentBlock {
    #[serde(rename = "type")]
    #[schema(example = "text")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Message content: a string, or a list of typed blocks.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

/// `stream_options` of the OpenAI streaming protocols.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct StreamOptions {
    /// A final chunk carrying the usage (and no choices) before `[DONE]`.
    #[serde(default)]
    pub include_usage: Option<bool>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// OpenAI chat completions.

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

/// One chat message (spec §2.7, with the roles and fields of tool calling).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatMessage {
    pub role: ChatRole,
    /// A string or typed parts; null for an assistant message that only
    /// calls tools.
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub name: Option<String>,
    /// An assistant's tool calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    /// The call a `tool` message answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Reasoning text of a reasoning model's earlier answer.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST /v1/chat/completions` (spec §4.3).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 64}))]
pub struct ChatCompletionRequest {
    #[schema(example = "gpt-4o-mini")]
    pub model: String,
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessage>,
    /// `true` answers with server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Only 1 is served.
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub stop: Option<StringOrList>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// `none`, `auto`, `required`, or an object naming a function.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `none` switches thinking off; `low`, `medium`, `high` ask for it.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// `false` switches thinking off where the model allows it.
    #[serde(default)]
    pub enable_thinking: Option<bool>,
    /// `{"type": "disabled"}` switches thinking off.
    #[serde(default)]
    pub thinking: Option<Value>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Token counts of an OpenAI chat or completions answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// `cached_tokens` (part of `prompt_tokens`), `cache_write_tokens`.
    #[serde(default)]
    pub prompt_tokens_details: Option<Value>,
    /// `reasoning_tokens` (part of `completion_tokens`).
    #[serde(default)]
    pub completion_tokens_details: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatAnswerMessage {
    #[schema(example = "assistant")]
    pub role: String,
    pub content: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatAnswerMessage,
    /// `stop`, `length`, `tool_calls`, `content_filter`, or the vendor's
    /// own word.
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A non-streamed chat completion (spec §2.8).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatCompletion {
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    pub created: i64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Option<ChatUsage>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One `data:` event of a streamed chat completion (spec §2.9); the stream
/// ends with `data: [DONE]`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: String,
    pub created: i64,
    pub model: String,
    /// Each with `index`, `delta` (`role`, `content`, `reasoning_content`,
    /// `tool_calls`) and `finish_reason`.
    pub choices: Vec<Value>,
    pub usage: Option<ChatUsage>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// OpenAI legacy completions.

/// `POST /v1/completions`. One prompt per call; `echo`, `suffix`,
/// `best_of` and `logprobs` are refused with a 400.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "gpt-4o-mini", "prompt": "Say hello", "max_tokens": 16}))]
pub struct CompletionRequest {
    #[schema(example = "gpt-4o-mini")]
    pub model: String,
    pub prompt: StringOrList,
    /// Default 16.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub stop: Option<StringOrList>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct Completion {
    pub id: String,
    /// `text_completion`.
    pub object: String,
    pub created: i64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    pub usage: Option<ChatUsage>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// OpenAI Responses.

/// Input of the Responses API: text, or a list of items (messages with a
/// `role`, typed items such as `function_call_output`).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ResponsesInput {
    Text(String),
    Items(Vec<BTreeMap<String, Value>>),
}

/// `POST /v1/responses`. Stateless: `previous_response_id` and stored
/// items are refused (send the whole conversation).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "gpt-4o-mini", "input": "Hello", "max_output_tokens": 64}))]
pub struct ResponsesRequest {
    #[schema(example = "gpt-4o-mini")]
    pub model: String,
    pub input: ResponsesInput,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `{"effort": ...}`.
    #[serde(default)]
    pub reasoning: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ResponsesUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A Responses API answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ResponseObject {
    pub id: String,
    /// `response`.
    pub object: String,
    pub created_at: i64,
    pub model: String,
    /// `completed`, or `incomplete` with `incomplete_details`.
    pub status: String,
    /// Messages, reasoning and function calls, in order.
    pub output: Vec<Value>,
    pub usage: Option<ResponsesUsage>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// Anthropic Messages.

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessagesRole {
    User,
    Assistant,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct MessagesMessage {
    pub role: MessagesRole,
    pub content: MessageContent,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST /v1/messages` (spec §4.4). Any `anthropic-version` is accepted.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hello"}]}))]
pub struct MessagesRequest {
    #[schema(example = "claude-sonnet-4-5")]
    pub model: String,
    #[schema(minimum = 0)]
    pub max_tokens: u64,
    #[schema(min_items = 1)]
    pub messages: Vec<MessagesMessage>,
    /// A string or a list of text blocks.
    #[serde(default)]
    pub system: Option<MessageContent>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub top_k: Option<u32>,
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `{"type": "enabled", "budget_tokens": N}` or `{"type": "disabled"}`.
    #[serde(default)]
    pub thinking: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct MessagesUsage {
    /// Prompt tokens neither read from nor written to the cache.
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A Messages answer: text, thinking and tool_use blocks.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct MessagesResponse {
    pub id: String,
    /// `message`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `assistant`.
    pub role: String,
    pub model: String,
    pub content: Vec<ContentBlock>,
    /// `end_turn`, `max_tokens`, `tool_use`, `stop_sequence`, `refusal`, or
    /// the vendor's own word.
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub stop_sequence: Option<String>,
    pub usage: MessagesUsage,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// Gemini.

/// A Gemini content: a role (`user`, `model`, `function`; optional for a
/// single turn) and its parts.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct GeminiContent {
    #[serde(default)]
    pub role: Option<String>,
    /// `{"text"}`, `{"functionCall"}`, `{"functionResponse"}`,
    /// `{"inlineData"}`, with `thought` and `thoughtSignature` where they
    /// apply.
    pub parts: Vec<BTreeMap<String, Value>>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeminiGenerationConfig {
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    /// `{"thinkingBudget": N, "includeThoughts": bool}`; a budget of 0
    /// switches thinking off.
    #[serde(default)]
    pub thinking_config: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST .../models/{model}:generateContent` and `:streamGenerateContent`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"contents": [{"role": "user", "parts": [{"text": "Hello"}]}], "generationConfig": {"maxOutputTokens": 64}}))]
pub struct GenerateContentRequest {
    #[schema(min_items = 1)]
    pub contents: Vec<GeminiContent>,
    #[serde(default)]
    pub system_instruction: Option<GeminiContent>,
    #[serde(default)]
    pub generation_config: Option<GeminiGenerationConfig>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_config: Option<Value>,
    #[serde(default)]
    pub safety_settings: Option<Vec<Value>>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeminiCandidate {
    pub content: Option<GeminiContent>,
    /// `STOP`, `MAX_TOKENS`, `SAFETY`, ..., `OTHER`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeminiUsage {
    #[serde(default)]
    pub prompt_token_count: Option<u64>,
    #[serde(default)]
    pub candidates_token_count: Option<u64>,
    #[serde(default)]
    pub total_token_count: Option<u64>,
    /// Part of `promptTokenCount`.
    #[serde(default)]
    pub cached_content_token_count: Option<u64>,
    /// Outside `candidatesTokenCount`.
    #[serde(default)]
    pub thoughts_token_count: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A generateContent answer; each `data:` event of a stream has the same
/// shape (no `[DONE]`).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    pub candidates: Vec<GeminiCandidate>,
    #[serde(default)]
    pub usage_metadata: Option<GeminiUsage>,
    #[serde(default)]
    pub model_version: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST .../models/{model}:embedContent`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"content": {"parts": [{"text": "Hello"}]}}))]
pub struct EmbedContentRequest {
    pub content: GeminiContent,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub task_type: Option<String>,
    #[serde(default)]
    pub output_dimensionality: Option<u32>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct GeminiEmbedding {
    pub values: Vec<f64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct EmbedContentResponse {
    pub embedding: GeminiEmbedding,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST .../models/{model}:batchEmbedContents`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"requests": [{"model": "models/text-embedding-004", "content": {"parts": [{"text": "Hello"}]}}]}))]
pub struct BatchEmbedContentsRequest {
    #[schema(min_items = 1)]
    pub requests: Vec<EmbedContentRequest>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct BatchEmbedContentsResponse {
    pub embeddings: Vec<GeminiEmbedding>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// The OpenAI-style endpoint families.

/// Input of embeddings and moderations: a string, a list of strings, or
/// token ids.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum EmbeddingInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    Float,
    Base64,
}

/// `POST /v1/embeddings`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "text-embedding-3-small", "input": "Hello"}))]
pub struct EmbeddingsRequest {
    #[schema(example = "text-embedding-3-small")]
    pub model: String,
    pub input: EmbeddingInput,
    #[serde(default)]
    pub encoding_format: Option<EncodingFormat>,
    #[serde(default)]
    pub dimensions: Option<u32>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A vector: numbers, or (with `encoding_format: base64`) the base64 of
/// little-endian float32s.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Floats(Vec<f64>),
    Base64(String),
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct Embedding {
    /// `embedding`.
    pub object: String,
    pub index: u32,
    pub embedding: EmbeddingVector,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct EmbeddingsResponse {
    /// `list`.
    pub object: String,
    pub data: Vec<Embedding>,
    pub model: String,
    #[serde(default)]
    pub usage: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageResponseFormat {
    Url,
    B64Json,
}

/// `POST /v1/images/generations`. Not streamed.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "gpt-image-1", "prompt": "a lighthouse at dawn", "n": 1, "size": "1024x1024"}))]
pub struct ImageRequest {
    #[schema(example = "gpt-image-1")]
    pub model: String,
    #[schema(min_length = 1)]
    pub prompt: String,
    /// 1 to 10, default 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10)]
    pub n: Option<u32>,
    #[serde(default)]
    #[schema(example = "1024x1024")]
    pub size: Option<String>,
    #[serde(default)]
    #[schema(example = "standard")]
    pub quality: Option<String>,
    #[serde(default)]
    pub response_format: Option<ImageResponseFormat>,
    #[serde(default)]
    pub style: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ImageData {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub b64_json: Option<String>,
    #[serde(default)]
    pub revised_prompt: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The vendor's answer, relayed as it came.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ImagesResponse {
    pub created: i64,
    pub data: Vec<ImageData>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpeechFormat {
    Mp3,
    Opus,
    Aac,
    Flac,
    Wav,
    Pcm,
}

/// `POST /v1/audio/speech`: the audio bytes in the format's content type.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "tts-1", "input": "Hello there", "voice": "alloy"}))]
pub struct SpeechRequest {
    #[schema(example = "tts-1")]
    pub model: String,
    #[schema(min_length = 1)]
    pub input: String,
    #[schema(example = "alloy")]
    pub voice: String,
    #[serde(default)]
    pub response_format: Option<SpeechFormat>,
    #[serde(default)]
    pub speed: Option<f64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptionFormat {
    Json,
    Text,
    Srt,
    Vtt,
    VerboseJson,
}

/// `POST /v1/audio/transcriptions`, a `multipart/form-data` upload.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct TranscriptionRequest {
    /// The audio file.
    #[schema(value_type = String, format = Binary)]
    pub file: String,
    #[schema(example = "whisper-1")]
    pub model: String,
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub response_format: Option<TranscriptionFormat>,
    #[serde(default)]
    pub temperature: Option<f64>,
}

/// A transcription in `json` or `verbose_json` (`text`, `srt` and `vtt`
/// come as `text/plain`).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct Transcription {
    pub text: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A rerank document: a string or `{"text"}`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum RerankDocument {
    Text(String),
    Object(RerankText),
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RerankText {
    pub text: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST /v1/rerank` (Jina / Cohere style).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "rerank-v1", "query": "lighthouse", "documents": ["a lighthouse at dawn", "a cat"], "top_n": 1}))]
pub struct RerankRequest {
    #[schema(example = "rerank-v1")]
    pub model: String,
    pub query: String,
    #[schema(min_items = 1)]
    pub documents: Vec<RerankDocument>,
    #[serde(default)]
    pub top_n: Option<u32>,
    #[serde(default)]
    pub return_documents: Option<bool>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RerankResult {
    pub index: u32,
    pub relevance_score: f64,
    #[serde(default)]
    pub document: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RerankResponse {
    pub results: Vec<RerankResult>,
    #[serde(default)]
    pub usage: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `POST /v1/moderations`; `model` defaults to `omni-moderation-latest`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"input": "Hello"}))]
pub struct ModerationRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub input: EmbeddingInput,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ModerationResult {
    pub flagged: bool,
    pub categories: BTreeMap<String, Value>,
    pub category_scores: BTreeMap<String, Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ModerationResponse {
    pub id: String,
    pub model: String,
    pub results: Vec<ModerationResult>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// ---------------------------------------------------------------------------
// Video requests (the host reads them as loose fields: `video::params`).

/// `POST /v1/videos/quote` (spec §4.5).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "video-fast", "seconds": "4"}))]
pub struct VideoQuoteRequest {
    #[schema(example = "video-fast")]
    pub model: String,
    /// Seconds as a string; default `"4"`. A JSON number is refused.
    #[serde(default)]
    #[schema(example = "4")]
    pub seconds: Option<String>,
    /// The integer form of `seconds`.
    #[serde(default)]
    pub duration: Option<u32>,
    #[serde(default)]
    pub size: Option<String>,
    /// Alias of `size`; also `480p`, `720p`, `1080p`.
    #[serde(default)]
    pub resolution: Option<String>,
}

/// `POST /v1/videos` (spec §4.4b), as JSON or `multipart/form-data`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[schema(example = json!({"model": "video-fast", "prompt": "a lighthouse at dawn", "seconds": "4"}))]
pub struct VideoCreateRequest {
    #[schema(example = "video-fast")]
    pub model: String,
    pub prompt: String,
    /// Seconds as a string; default `"4"`. A JSON number is refused.
    #[serde(default)]
    pub seconds: Option<String>,
    /// The integer form of `seconds`.
    #[serde(default)]
    pub duration: Option<u32>,
    /// `1280x720` (default), `720x1280`, `1792x1024`, `1024x1792`.
    #[serde(default)]
    pub size: Option<String>,
    /// Alias of `size`; also `480p`, `720p`, `1080p`.
    #[serde(default)]
    pub resolution: Option<String>,
    /// `16:9` or `9:16`; derived from `size` when omitted.
    #[serde(default)]
    pub ratio: Option<String>,
    /// Locks the quoted price.
    #[serde(default)]
    pub quote_id: Option<String>,
    #[serde(default)]
    pub webhook_url: Option<String>,
    #[serde(default)]
    pub webhook_secret: Option<String>,
    #[serde(default)]
    pub webhook_secret_prev: Option<String>,
}
