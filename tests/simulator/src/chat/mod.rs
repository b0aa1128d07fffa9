//! The chat vendors: OpenAI `POST /v1/chat/completions` ([`openai`]),
//! Anthropic `POST /v1/messages` ([`anthropic`]) and Gemini
//! `POST /v1beta/models/{model}:generateContent` / `:streamGenerateContent`
//! ([`gemini`]). Each protocol reads its body into the same
//! protocol-neutral facts ([`request`]: turns, options), one pure [`plan`]
//! decides the answer, and the protocol renders it. The wire details are in
//! each protocol's module; the rules below hold for all three.
//!
//! The gateway's tests compute expected values from these rules, so changing
//! any of them is a breaking change:
//!
//! - **Turns.** The conversation is a list of turns. The system prompt is a
//!   turn (OpenAI: each `system` message; Anthropic: `system`; Gemini:
//!   `systemInstruction`). A turn's text = its text blocks / parts joined by
//!   single spaces, plus the text of the tool results it carries (OpenAI: a
//!   `tool` message's content; Anthropic: a `tool_result` block's content
//!   text; Gemini: a `functionResponse`'s `response` — the value of its only
//!   member when it has exactly one and that is a string, else its compact
//!   JSON with keys sorted). Thinking text, images and tool-call arguments
//!   are not text.
//! - **Tokens.** One whitespace-separated word is one token. Prompt tokens =
//!   Σ over all turns (system included) of (words of the turn's text + 1).
//!   Directives (below) are part of the text as sent and so are counted.
//! - **Cache.** Cached (read) tokens = the system turns' tokens (words + 1),
//!   0 without one: OpenAI `prompt_tokens_details.cached_tokens` and Gemini
//!   `cachedContentTokenCount`, both inside the prompt tokens; Anthropic
//!   `cache_read_input_tokens`, with `cache_creation_input_tokens` = the
//!   words of the first user turn's text (no +1) and `input_tokens` =
//!   prompt − read − creation.
//! - **Last user message.** The last user turn, unless it only carries tool
//!   results (OpenAI: the last `user` message, whatever it holds). Its text,
//!   directives removed, is the *last user message* below.
//! - **Reply.** With `h` = 64-bit FNV-1a of the subject — the text of the
//!   last tool result when the last turn carries one (OpenAI: the last
//!   message is a `tool` message; Anthropic: the last message is a `user`
//!   message with `tool_result` blocks, the last of them; Gemini: the last
//!   content has a `functionResponse` part, the last of them), else the last
//!   user message — the reply is `Simulated reply to: <its first 8 words>.`
//!   padded with filler words chosen from `h` to exactly `16 + h % 16` words.
//!   Content is the words joined by single spaces; one word = one output
//!   token.
//! - **Reasoning.** Models whose name contains `reason` (any case), and any
//!   model when the request enables thinking (OpenAI: `reasoning_effort`
//!   `minimal`/`low`/`medium`/`high`, `enable_thinking: true` or
//!   `thinking.type: "enabled"`; Anthropic: `thinking.type` `enabled` or
//!   `adaptive`; Gemini: `thinkingConfig.includeThoughts: true` or
//!   `thinkingBudget` > 0), first produce the 8 words `Let me think about
//!   this step by step.` — unless thinking is switched off (OpenAI:
//!   `enable_thinking: false`, `thinking.type: "disabled"` or
//!   `reasoning_effort: "none"`; Anthropic: `thinking.type: "disabled"`;
//!   Gemini: `thinkingBudget: 0`), which wins. Reasoning words are output
//!   tokens and reasoning tokens.
//! - **Stop sequences** (OpenAI `stop`, a string or an array; Anthropic
//!   `stop_sequences`; Gemini `generationConfig.stopSequences`): when a
//!   reply word equals a stop string exactly, the content is the words
//!   before the first such word and the finish is "stop sequence".
//! - **Budget** (OpenAI `max_completion_tokens`, else `max_tokens`;
//!   Anthropic `max_tokens`, required; Gemini `maxOutputTokens`): reasoning
//!   is never cut but is subtracted first; content keeps at most
//!   `max - reasoning` words (possibly 0); when words were dropped the
//!   finish is "length". Stop sequences apply before the budget.
//! - **Tools.** Declared tools (OpenAI `tools[].function.name`; Anthropic
//!   `tools[].name`; Gemini `tools[].functionDeclarations[].name`), unless
//!   the tool choice forbids them, yield a call to the first tool, or to the
//!   one the choice forces, instead of text — except when the conversation
//!   ends with a tool result: then the answer is the reply to it, and no
//!   tool is called. The call's id hex is the low 32 bits of `h` of the last
//!   user message as 8 hex digits (OpenAI `call_<hex>`, Anthropic
//!   `toolu_<hex>`, Gemini no id); its arguments are
//!   `{"query":"<last user message>"}` (compact JSON); its output tokens are
//!   the words of the arguments string (plus reasoning). Calls are not cut
//!   by the budget; the finish is "tools".
//! - **Parallel calls.** `[[sim:parallel]]` calls every callable tool, in
//!   declaration order (a forced tool is still called alone). Call 0 is the
//!   call above; call `i` ≥ 1 has id hex = low 32 bits of FNV-1a of
//!   `<last user message>#<i>` and arguments `{"index":i,"query":"<last user
//!   message>"}` (compact, keys sorted). Output tokens: Σ of every call's
//!   argument words.
//! - **Refusal.** `[[sim:refuse]]` gives no content and no calls (the
//!   reasoning stays, when thinking): output tokens 0 + reasoning; the
//!   finish is "refused".
//! - **Raw finish.** `[[sim:finish=RAW]]` keeps the answer but reports the
//!   finish reason RAW verbatim, in any protocol.
//! - **Finish words.**
//!
//!   | finish        | OpenAI           | Anthropic       | Gemini       |
//!   |---------------|------------------|-----------------|--------------|
//!   | stop          | `stop`           | `end_turn`      | `STOP`       |
//!   | length        | `length`         | `max_tokens`    | `MAX_TOKENS` |
//!   | tools         | `tool_calls`     | `tool_use`      | `STOP`       |
//!   | stop sequence | `stop`           | `stop_sequence` | `STOP`       |
//!   | refused       | `content_filter` | `refusal`       | `SAFETY`     |
//!   | raw           | RAW              | RAW             | RAW          |
//!
//! - **Ids.** `n` counts chat answers from 1 per server, across protocols:
//!   OpenAI `chatcmpl-sim-<n>`, Anthropic `msg_sim_<n>`, Gemini
//!   `responseId` `sim-<n>`.
//! - **Streams** carry the same words: one delta per reasoning word and per
//!   content word (each but the last with a trailing space), tool-call
//!   arguments in three fragments (Gemini: each call whole), then the
//!   protocol's finish marker(s).
//! - **Truncated streams.** `[[sim:truncate]]` (or the queued fault
//!   `truncate`): a stream ends cleanly after its first event and three more,
//!   never including the protocol's finish marker (OpenAI: no
//!   `finish_reason` chunk, no usage chunk, no `[DONE]`; Anthropic: no
//!   `message_delta` / `message_stop`; Gemini: no chunk with `finishReason`).
//!   A non-streamed answer is normal.
//! - **Errors after the text.** `[[sim:error_midway]]` (or the queued fault
//!   `error_midway`): a stream sends every event before its finish marker,
//!   then its protocol's error event (as the `error_event` fault's) where
//!   the marker and the usage would be, and ends. A non-streamed answer is
//!   normal.
//! - **Recorded usage.** The usage an answer reported, in the protocol's own
//!   shape (OpenAI `usage`; Anthropic the final `usage` with all four
//!   fields; Gemini `usageMetadata`), is recorded with the request; none for
//!   errors, faults (cut, truncated, malformed) and OpenAI streams without
//!   `stream_options.include_usage`.
//!
//! Faults and stream-shape directives are described in [`crate::faults`] and
//! the crate docs; each protocol answers them in its own error envelope and
//! stream format.

pub mod anthropic;
mod deltas;
pub mod gemini;
pub mod openai;
pub mod plan;
pub mod request;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::Value;

use crate::errors::Dialect;
use crate::faults::{self, Fault, Framing};
use crate::record::ReportedUsage;
use crate::sse::{self, Out};
use crate::SimState;
pub use request::ChatRequest;

/// Which protocol answers, and how it delivers a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    OpenAi,
    Anthropic,
    /// `sse: false` is Gemini's streaming without `?alt=sse`: one JSON
    /// array of the chunks.
    Gemini {
        sse: bool,
    },
}

impl Wire {
    /// Events a stream sends before its first delta: OpenAI the role chunk;
    /// Anthropic `message_start`, `ping` and the first
    /// `content_block_start`; Gemini none.
    fn opening(self) -> usize {
        match self {
            Wire::OpenAi => 1,
            Wire::Anthropic => 3,
            Wire::Gemini { .. } => 0,
        }
    }

    pub fn dialect(self) -> Dialect {
        match self {
            Wire::OpenAi => Dialect::OpenAi,
            Wire::Anthropic => Dialect::Anthropic,
            Wire::Gemini { .. } => Dialect::Gemini,
        }
    }
}

/// What one protocol makes of a plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rendered {
    Plain(Value),
    /// Events in order; those from `finish_at` on are the protocol's finish
    /// marker(s) (and what only comes with them, such as the usage).
    Stream {
        events: Vec<Out>,
        finish_at: usize,
    },
}

/// How many events a cut or truncated stream keeps: the first and three
/// more (fewer when the stream is shorter: a cut stream never sends its last
/// event, a truncated one none of its finish marker).
const CUT_AFTER: usize = 4;

/// Faults, then the plan, rendered for `wire`; the reported usage goes on
/// the response for the record.
pub(crate) async fn respond(state: &SimState, req: ChatRequest, wire: Wire) -> Response {
    let dialect = wire.dialect();
    let fault = match faults::apply(
        state,
        dialect,
        req.directives.latency,
        req.directives.fault.clone(),
    )
    .await
    {
        Ok(fault) => fault,
        Err(refused) => return refused,
    };
    let mut framing = req.directives.framing;
    if dialect == Dialect::Gemini {
        // Gemini never sends comments (its SDK refuses them).
        framing.comments = false;
    }
    if fault == Some(Fault::Malformed) {
        return malformed(state, req.stream, framing, wire);
    }
    if fault == Some(Fault::ErrorEvent) && req.stream {
        return error_event(state, framing, wire);
    }
    let cut = fault == Some(Fault::Cut);
    let truncate = fault == Some(Fault::Truncate) && req.stream;
    let midway = fault == Some(Fault::ErrorMidway) && req.stream;

    let plan = plan::plan(&req);
    let n = state.next_chat_id();
    let (rendered, mut usage) = match wire {
        Wire::OpenAi => openai::render(&req, &plan, n),
        Wire::Anthropic => anthropic::render(&req, &plan, n),
        Wire::Gemini { .. } => gemini::render(&req, &plan, n),
    };
    if cut || truncate || midway {
        // The usage never reaches the client.
        usage = None;
    }
    let rendered = if req.directives.silent && wire == Wire::OpenAi {
        usage = None;
        without_usage(rendered)
    } else {
        rendered
    };
    let rendered = match rendered {
        Rendered::Stream {
            mut events,
            finish_at,
        } => {
            if truncate {
                events.truncate(CUT_AFTER.min(finish_at));
            } else if cut {
                // Never the last event, however short the stream.
                events.truncate(CUT_AFTER.min(events.len().saturating_sub(1)));
            } else if midway {
                events.truncate(finish_at);
                events.push(failure(wire));
            }
            if wire == (Wire::Gemini { sse: false }) {
                Rendered::Plain(Value::Array(
                    events
                        .iter()
                        .filter_map(|e| serde_json::from_str(&e.data).ok())
                        .collect(),
                ))
            } else {
                Rendered::Stream { events, finish_at }
            }
        }
        plain => plain,
    };
    let mut resp = match rendered {
        Rendered::Stream { events, .. } if framing.whole && !cut => {
            let body: Vec<u8> = sse::frame_indexed(&events, framing)
                .into_iter()
                .flat_map(|(_, piece)| piece.to_vec())
                .collect();
            event_stream(Body::from(body))
        }
        Rendered::Stream { events, finish_at } => {
            let d = &req.directives;
            let pieces = pace(
                sse::frame_indexed(&events, framing),
                d.chunk_delay,
                d.delta_delay,
                wire.opening() + 1..finish_at,
            );
            event_stream(sse::paced_each(
                pieces,
                d.chunk_delay,
                cut,
                state.shutdown.clone(),
            ))
        }
        Rendered::Plain(body) if cut => {
            let json = Bytes::from(body.to_string());
            let half = json.slice(..json.len() / 2);
            json_response(sse::paced(vec![half], None, true, state.shutdown.clone()))
        }
        Rendered::Plain(body) => Json(body).into_response(),
    };
    if let Some(usage) = usage {
        resp.extensions_mut().insert(ReportedUsage(usage));
    }
    resp
}

/// The pause before each framed piece: `delta` (when set) before the first
/// piece of every event in `delta_events` (the second delta up to the finish
/// marker), else `chunk`.
fn pace(
    pieces: Vec<(usize, Bytes)>,
    chunk: Option<Duration>,
    delta: Option<Duration>,
    delta_events: std::ops::Range<usize>,
) -> Vec<(Option<Duration>, Bytes)> {
    let mut previous = None;
    pieces
        .into_iter()
        .map(|(event, piece)| {
            let starts_event = previous != Some(event);
            previous = Some(event);
            let pause = match delta {
                Some(d) if starts_event && delta_events.contains(&event) => Some(d),
                _ => chunk,
            };
            (pause, piece)
        })
        .collect()
}

/// An OpenAI answer as a server that never counts sends it: no `usage`
/// member anywhere, and no usage-only chunk.
fn without_usage(rendered: Rendered) -> Rendered {
    let strip = |mut v: Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("usage");
        }
        v
    };
    match rendered {
        Rendered::Plain(body) => Rendered::Plain(strip(body)),
        Rendered::Stream { events, finish_at } => Rendered::Stream {
            events: events
                .into_iter()
                .filter_map(|ev| {
                    let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
                        return Some(ev);
                    };
                    if v["choices"].as_array().is_some_and(Vec::is_empty) {
                        return None;
                    }
                    Some(Out {
                        event: ev.event,
                        data: strip(v).to_string(),
                    })
                })
                .collect(),
            finish_at,
        },
    }
}

/// A 200 stream that reports an error instead of the answer (see
/// [`Fault::ErrorEvent`]).
fn error_event(state: &SimState, framing: Framing, wire: Wire) -> Response {
    let opening = match wire {
        Wire::OpenAi => Some(Out::data(
            r#"{"id":"chatcmpl-error","object":"chat.completion.chunk","created":0,"model":"sim","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        )),
        Wire::Anthropic => Some(Out::named(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_error","type":"message","role":"assistant","model":"sim","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}"#,
        )),
        Wire::Gemini { .. } => None,
    };
    let events: Vec<Out> = opening.into_iter().chain([failure(wire)]).collect();
    event_stream(sse::paced(
        sse::frame_events(&events, framing),
        None,
        false,
        state.shutdown.clone(),
    ))
}

/// The event with which a stream of `wire` reports a failure.
fn failure(wire: Wire) -> Out {
    match wire {
        Wire::OpenAi => Out::data(
            r#"{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}"#,
        ),
        Wire::Anthropic => Out::named(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Wire::Gemini { .. } => Out::data(
            r#"{"error":{"code":503,"message":"The model is overloaded","status":"UNAVAILABLE"}}"#,
        ),
    }
}

/// A 200 whose body breaks mid-JSON, in the protocol's own framing: OpenAI
/// `data: {not json` then `[DONE]`; Anthropic a `message_start` event with
/// `{not json` then `message_stop`; Gemini `data: {not json` alone.
fn malformed(state: &SimState, stream: bool, framing: Framing, wire: Wire) -> Response {
    let events = match wire {
        Wire::OpenAi => vec![Out::data("{not json"), Out::data("[DONE]")],
        Wire::Anthropic => vec![
            Out::named("message_start", "{not json"),
            Out::named("message_stop", r#"{"type":"message_stop"}"#),
        ],
        Wire::Gemini { .. } => vec![Out::data("{not json")],
    };
    let plain = match wire {
        Wire::OpenAi => r#"{"id":"chatcmpl-broken","choices":["#,
        Wire::Anthropic => r#"{"id":"msg_broken","type":"message","content":["#,
        Wire::Gemini { sse: false } if stream => r#"[{"candidates":["#,
        Wire::Gemini { .. } => r#"{"candidates":["#,
    };
    if stream && wire != (Wire::Gemini { sse: false }) {
        event_stream(sse::paced(
            sse::frame_events(&events, framing),
            None,
            false,
            state.shutdown.clone(),
        ))
    } else {
        json_response(Body::from(plain))
    }
}

fn event_stream(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn json_response(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_pacing_starts_after_the_first_delta_and_stops_at_the_finish() {
        let ms = Duration::from_millis;
        // Events: 0 opening, 1 first delta, 2 and 3 deltas, 4 finish; event 3
        // framed in two pieces.
        let pieces: Vec<(usize, Bytes)> = [0, 1, 2, 3, 3, 4]
            .into_iter()
            .map(|i| (i, Bytes::from(i.to_string())))
            .collect();
        let pauses = |chunk, delta| -> Vec<Option<Duration>> {
            pace(pieces.clone(), chunk, delta, 2..4)
                .into_iter()
                .map(|(p, _)| p)
                .collect()
        };
        let d = Some(ms(20));
        assert_eq!(pauses(None, d), [None, None, d, d, None, None]);
        let c = Some(ms(1));
        assert_eq!(pauses(c, d), [c, c, d, d, c, c]);
        assert_eq!(pauses(c, None), [c; 6]);
    }
}
