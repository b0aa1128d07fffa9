//! A vendor request the host builds itself, on the adapter's word that
//! calls alike get the same (`stream-splice.alike-requests` in
//! `wit/plugin.wit`; the shapes kept are `plugins::alike`'s, and why).
//!
//! The edit, as the contract states it (OpenAI chat and completions, where
//! the client speaks the vendor's protocol): the client's body, a JSON
//! object, with `model` set to the channel's upstream model; a streamed
//! call gets `stream: true` and a `stream_options` object with
//! `include_usage: true` (the client's other members of it kept, one absent
//! or not an object replaced), and the state `usage` when the client itself
//! had asked for `include_usage`; a call not streamed gets a `stream: true`
//! turned to `false`. Every other member goes on as the client wrote it: the
//! top level is read with its keys borrowed and its values as written, the
//! way the SDK's passthrough reads it, and a body that cannot be read so (not
//! an object, a key written with an escape) is left to the adapter.
//!
//! The edit is made two ways. [`edit`] reads the body as the contract says
//! and writes the members back, key by key; it is the reference, and the
//! check of an adapter's word below uses it. A call alike to one the word
//! was given for is edited by [`splice`] instead: the head of an OpenAI
//! chat or completions request (`protocol`) already read the body once and
//! kept where the model's, the stream's and the stream options' values are
//! ([`Places`]), so the client's bytes are copied with those values replaced
//! (a member the body lacks added before its closing brace) and the body is
//! not read a second time. The two make the same JSON wherever the head
//! kept places, which it does not where [`edit`] cannot read the body (a key
//! written with an escape); the member order and spacing the client wrote
//! are kept, and so is an unknown member written twice, whose last value is
//! the one a JSON reader takes, as [`edit`] does.
//!
//! The word is checked on the call that gives it ([`check`]): the adapter's
//! own request must be this edit (the body the same JSON, the same state),
//! or the host keeps nothing and takes that adapter's word no more. `gateway
//! adapter test` makes the same check on every fixture.

use crate::plugins::bindings::types::{Protocol, RequestCtx};
use crate::plugins::registry::AdapterPlugin;
use crate::plugins::session::{AnswerMode, OutboundBody, OutboundRequest};
use crate::protocol::Places;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::Range;

/// The state of a streamed call whose client asked for the usage chunk
/// itself (the contract's; empty otherwise).
const CLIENT_WANTS_USAGE: &str = "usage";

/// The body and state of the host's edit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edited {
    pub body: Vec<u8>,
    pub state: String,
}

/// The host's edit of a client's `body` (see the module doc); `None` where
/// the host has no edit for `protocol` or cannot read the body for it.
pub(crate) fn edit(
    protocol: Protocol,
    body: &[u8],
    upstream_model: &str,
    stream: bool,
) -> Option<Edited> {
    if !matches!(protocol, Protocol::OpenaiChat | Protocol::OpenaiCompletions) {
        return None;
    }
    let model = serde_json::value::to_raw_value(upstream_model).ok()?;
    let mut members: BTreeMap<&str, &RawValue> = serde_json::from_slice(body).ok()?;
    members.insert("model", &model);
    let options;
    let mut client_wants_usage = false;
    if stream {
        members.insert("stream", RawValue::TRUE);
        let (sent, client_asked) = stream_options(members.get("stream_options").map(|o| value(o)));
        client_wants_usage = client_asked;
        options = serde_json::value::to_raw_value(&sent).ok()?;
        members.insert("stream_options", &options);
    } else if members
        .get("stream")
        .is_some_and(|s| value(s) == Value::Bool(true))
    {
        members.insert("stream", RawValue::FALSE);
    }
    Some(Edited {
        body: serde_json::to_vec(&members).ok()?,
        state: state(client_wants_usage),
    })
}

/// The `stream_options` a streamed call's edit sends, from the client's
/// (its value, if it wrote one): the client's object with `include_usage:
/// true` set (a value not an object replaced); and whether the client had
/// asked for the usage chunk itself.
fn stream_options(client: Option<Value>) -> (Map<String, Value>, bool) {
    let mut options = match client {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let client_asked = options.get("include_usage") == Some(&Value::Bool(true));
    options.insert("include_usage".into(), Value::Bool(true));
    (options, client_asked)
}

/// The edit's state: whether the client asked for the usage chunk itself.
fn state(client_wants_usage: bool) -> String {
    if client_wants_usage {
        CLIENT_WANTS_USAGE.to_owned()
    } else {
        String::new()
    }
}

/// [`edit`]'s JSON written from the `places` the head of the client's
/// `body` found (see the module doc); `None` where a place is not in the
/// body.
pub(crate) fn splice(
    body: &[u8],
    places: &Places,
    upstream_model: &str,
    stream: bool,
) -> Option<Edited> {
    /// A member's new value, and where its old one is (`None`: added).
    struct Put {
        at: Option<Range<usize>>,
        name: &'static str,
        value: Vec<u8>,
    }
    let mut puts = Vec::with_capacity(3);
    puts.push(Put {
        at: places.model.clone(),
        name: "model",
        value: serde_json::to_vec(upstream_model).ok()?,
    });
    let mut client_wants_usage = false;
    if stream {
        puts.push(Put {
            at: places.stream.clone(),
            name: "stream",
            value: b"true".to_vec(),
        });
        let client = match &places.stream_options {
            Some(at) => serde_json::from_slice(body.get(at.clone())?).ok(),
            None => None,
        };
        let (sent, client_asked) = stream_options(client);
        client_wants_usage = client_asked;
        puts.push(Put {
            at: places.stream_options.clone(),
            name: "stream_options",
            value: serde_json::to_vec(&sent).ok()?,
        });
    } else if let Some(at) = &places.stream {
        // A JSON `true` has one spelling.
        if body.get(at.clone())? == b"true" {
            puts.push(Put {
                at: Some(at.clone()),
                name: "stream",
                value: b"false".to_vec(),
            });
        }
    }
    puts.sort_by_key(|p| p.at.as_ref().map(|a| a.start));
    let mut out = Vec::with_capacity(body.len() + 64);
    let mut from = 0;
    for put in &puts {
        if let Some(at) = &put.at {
            out.extend_from_slice(body.get(from..at.start)?);
            out.extend_from_slice(&put.value);
            from = at.end;
        }
    }
    out.extend_from_slice(body.get(from..places.close)?);
    let mut comma = places.any_member;
    for put in puts.iter().filter(|p| p.at.is_none()) {
        if comma {
            out.push(b',');
        }
        comma = true;
        out.push(b'"');
        out.extend_from_slice(put.name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(&put.value);
    }
    out.extend_from_slice(body.get(places.close..)?);
    Some(Edited {
        body: out,
        state: state(client_wants_usage),
    })
}

/// A member's value as a tree (it was read as JSON already).
fn value(member: &RawValue) -> Value {
    serde_json::from_str(member.get()).unwrap_or(Value::Null)
}

/// What the check of an adapter's word found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// The adapter's request is the host's edit.
    Holds,
    /// The host cannot make its edit of this body (nothing to compare).
    Unread,
    /// The adapter's request is not the host's edit: why.
    Broken(String),
}

/// Checks an adapter's word that `out`, its request for the call `ctx` of
/// an adapter whose vendor speaks `vendor`, is the host's edit of
/// `client_body`.
pub(crate) fn check(
    vendor: Protocol,
    ctx: &RequestCtx,
    client_body: &[u8],
    out: &OutboundRequest,
) -> Word {
    if vendor != ctx.client_protocol {
        return Word::Broken("the client does not speak the vendor's protocol".into());
    }
    let OutboundBody::Bytes(sent) = &out.body else {
        return Word::Broken("its request's body is not bytes it made".into());
    };
    let Some(edited) = edit(
        ctx.client_protocol,
        client_body,
        &ctx.upstream_model,
        ctx.stream,
    ) else {
        return Word::Unread;
    };
    let as_json = |b: &[u8]| serde_json::from_slice::<Value>(b).ok();
    let sent_json = as_json(sent);
    if sent_json.is_none() || sent_json != as_json(&edited.body) {
        return Word::Broken(format!(
            "its request's body {} is not the host's edit {}",
            String::from_utf8_lossy(sent),
            String::from_utf8_lossy(&edited.body)
        ));
    }
    if out.state != edited.state {
        return Word::Broken(format!(
            "its state {:?} is not the host's {:?}",
            out.state, edited.state
        ));
    }
    Word::Holds
}

/// The request for a call alike to one the adapter gave its word for, made
/// by the host from the `places` the head of its `body` found; `None` when
/// there is none kept or the edit cannot read this body (no places: the
/// adapter translates it).
pub(crate) fn request(
    plugin: &AdapterPlugin,
    ctx: &RequestCtx,
    body: &[u8],
    places: Option<&Places>,
) -> Option<OutboundRequest> {
    if plugin.vendor_protocol != ctx.client_protocol {
        return None;
    }
    let places = places?;
    let alike = plugin.alike.find(ctx)?;
    let edited = splice(body, places, &ctx.upstream_model, ctx.stream)?;
    Some(OutboundRequest {
        method: alike.method.clone(),
        path: alike.path.clone(),
        headers: alike.headers.clone(),
        body: OutboundBody::Bytes(edited.body),
        answer: AnswerMode::Splice {
            model: ctx.model.clone(),
            alike_requests: true,
        },
        state: edited.state,
    })
}

/// After the adapter translated `body` for the call `ctx` into `out`: keeps
/// its shape for calls alike when it gave its word and the word holds;
/// distrusts the adapter when it does not.
pub(crate) fn learn(plugin: &AdapterPlugin, ctx: &RequestCtx, body: &[u8], out: &OutboundRequest) {
    if !matches!(
        out.answer,
        AnswerMode::Splice {
            alike_requests: true,
            ..
        }
    ) {
        return;
    }
    match check(plugin.vendor_protocol, ctx, body, out) {
        Word::Holds => plugin.alike.remember(
            ctx,
            out.method.clone(),
            out.path.clone(),
            out.headers.clone(),
        ),
        Word::Unread => {}
        Word::Broken(why) => {
            if plugin.alike.distrust() {
                tracing::warn!(
                    adapter = %plugin.info.name,
                    "the adapter says calls alike to this one get the request the host's edit makes, but {why}; its requests are all translated by the adapter until it is reloaded"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edited_json(body: &str, stream: bool) -> (Value, String) {
        let e = edit(Protocol::OpenaiChat, body.as_bytes(), "up", stream).unwrap();
        (serde_json::from_slice(&e.body).unwrap(), e.state)
    }

    #[test]
    fn the_model_is_renamed_and_the_rest_kept_as_written() {
        let body = r#"{"model":"c","messages":[{"role":"user","content":"caf\u00e9"}],"temperature":1e-4,"x":{"y":[1,2]}}"#;
        let e = edit(Protocol::OpenaiChat, body.as_bytes(), "up", false).unwrap();
        let text = String::from_utf8(e.body).unwrap();
        assert!(text.contains(r#""content":"caf\u00e9""#), "{text}");
        assert!(text.contains("1e-4"), "{text}");
        let (sent, state) = edited_json(body, false);
        assert_eq!(sent["model"], json!("up"));
        assert_eq!(sent["x"], json!({"y": [1, 2]}));
        assert_eq!(state, "");
    }

    #[test]
    fn a_stream_asks_for_usage_and_remembers_whether_the_client_did() {
        let (sent, state) = edited_json(r#"{"model":"c","stream":true}"#, true);
        assert_eq!(sent["stream"], json!(true));
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
        assert_eq!(state, "");
        let (sent, state) = edited_json(
            r#"{"model":"c","stream":true,"stream_options":{"include_usage":true,"k":3}}"#,
            true,
        );
        assert_eq!(
            sent["stream_options"],
            json!({"include_usage": true, "k": 3})
        );
        assert_eq!(state, CLIENT_WANTS_USAGE);
        let (sent, state) = edited_json(r#"{"stream_options":"n/a"}"#, true);
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
        assert_eq!(sent["stream"], json!(true));
        assert_eq!(state, "");
    }

    #[test]
    fn a_call_not_streamed_turns_the_clients_stream_off() {
        let (sent, _) = edited_json(r#"{"model":"c","stream":true}"#, false);
        assert_eq!(sent["stream"], json!(false));
        let (sent, _) = edited_json(r#"{"model":"c","stream":"yes"}"#, false);
        assert_eq!(sent["stream"], json!("yes"));
    }

    #[test]
    fn what_the_edit_cannot_read_is_left_to_the_adapter() {
        for body in [
            &b"[]"[..],
            b"\"x\"",
            b"{",
            b"",
            br#"{"\u006dodel":"escaped key"}"#,
        ] {
            assert!(edit(Protocol::OpenaiChat, body, "m", false).is_none());
        }
        for p in [
            Protocol::AnthropicMessages,
            Protocol::OpenaiResponses,
            Protocol::Gemini,
            Protocol::Embeddings,
        ] {
            assert!(edit(p, b"{}", "m", false).is_none(), "{p:?}");
        }
        assert!(edit(Protocol::OpenaiCompletions, b"{}", "m", false).is_some());
    }

    /// The host's edit is the SDK passthrough's (run natively) wherever the
    /// host makes it: the same JSON and the same state, over bodies of
    /// every shape the edit reads or leaves alone; and so is the splice
    /// wherever the head keeps places (`fuzz.rs` tries bodies of every
    /// shape the head reads).
    #[test]
    fn the_edit_and_the_splice_are_the_sdks_passthrough() {
        use gateway_guest_sdk::openai_passthrough::prepare_request;
        let bodies = [
            r#"{"model":"c","messages":[{"role":"user","content":"caf\u00e9 \"q\""}],
               "temperature":1e-4,"stream":true,"stream_options":{"include_usage":true,"x":1}}"#,
            r#"{"model":"c","stream":false,"stream_options":{"include_usage":false}}"#,
            r#"{"model":"c","stream":"yes","stream_options":"n/a"}"#,
            r#"{"stream_options":null,"stream":true,"a":1,"a":2}"#,
            r#"{"stream_options":{"include_usage":"true"},"n":12345678901234567890}"#,
            r#"  {"b":[1,2,{"c":{}}],"model":null}  "#,
            r#"{ "stream" : true , "x" : { "stream" : 1 } , "model" : "c" }"#,
            r#"{"stream_options":"n/a","stream":null}"#,
            "{ \n}\n",
            r#"{"\u006dodel":"escaped key"}"#,
            r#"{}"#,
            r#"[]"#,
            r#"{"#,
        ];
        let (mut made, mut spliced) = (0, 0);
        for body in bodies {
            let places = crate::protocol::chat_places(body.as_bytes());
            for stream in [false, true] {
                let Some(host) = edit(Protocol::OpenaiChat, body.as_bytes(), "up", stream) else {
                    assert_eq!(places, None, "{body}");
                    continue;
                };
                made += 1;
                let sdk = prepare_request(body.as_bytes(), "up", stream)
                    .unwrap_or_else(|e| panic!("{body}: {e}"));
                let json = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap();
                assert_eq!(json(&host.body), json(&sdk.body), "{body} {stream}");
                assert_eq!(host.state, sdk.state, "{body} {stream}");
                let Some(places) = &places else { continue };
                spliced += 1;
                let made = splice(body.as_bytes(), places, "up", stream).unwrap();
                assert_eq!(json(&made.body), json(&host.body), "{body} {stream}");
                assert_eq!(made.state, host.state, "{body} {stream}");
            }
        }
        assert_eq!(made, 20, "the edit reads all but the last three bodies");
        // The head refuses a `stream` that is not a boolean, so keeps no
        // places for that body.
        assert_eq!(
            spliced, 18,
            "the head keeps places for all it reads but one"
        );
    }

    /// The splice keeps the client's bytes around the values it replaces,
    /// and adds what the body lacks before its closing brace.
    #[test]
    fn the_splice_keeps_the_clients_bytes() {
        let body = br#"{ "x" : [1, 2], "model":"c" , "stream":true}"#;
        let places = crate::protocol::chat_places(body).unwrap();
        let made = splice(body, &places, "up", true).unwrap();
        assert_eq!(
            String::from_utf8(made.body).unwrap(),
            r#"{ "x" : [1, 2], "model":"up" , "stream":true,"stream_options":{"include_usage":true}}"#
        );
        let made = splice(body, &places, "up", false).unwrap();
        assert_eq!(
            String::from_utf8(made.body).unwrap(),
            r#"{ "x" : [1, 2], "model":"up" , "stream":false}"#
        );
        let empty = crate::protocol::chat_places(b"{}").unwrap();
        assert_eq!(
            splice(b"{}", &empty, "up", false).unwrap().body,
            br#"{"model":"up"}"#
        );
        // Places from another body that do not fit this one: no edit.
        assert!(splice(b"{}", &places, "up", true).is_none());
    }

    fn ctx(stream: bool) -> RequestCtx {
        RequestCtx {
            client_protocol: Protocol::OpenaiChat,
            model: "c".into(),
            upstream_model: "up".into(),
            stream,
            request_id: "r".into(),
            client_headers: Vec::new(),
            channel_options: Vec::new(),
        }
    }

    fn out(body: &str, state: &str) -> OutboundRequest {
        OutboundRequest {
            method: axum::http::Method::POST,
            path: "/chat/completions".into(),
            headers: axum::http::HeaderMap::new(),
            body: OutboundBody::Bytes(body.as_bytes().to_vec()),
            answer: AnswerMode::Splice {
                model: "c".into(),
                alike_requests: true,
            },
            state: state.into(),
        }
    }

    #[test]
    fn the_word_is_checked_against_the_edit() {
        let client = br#"{"model":"c","stream":true,"n":1}"#;
        let good = r#"{"n":1,"model":"up","stream":true,"stream_options":{"include_usage":true}}"#;
        assert_eq!(
            check(Protocol::OpenaiChat, &ctx(true), client, &out(good, "")),
            Word::Holds
        );
        let renamed_wrong =
            r#"{"n":1,"model":"c","stream":true,"stream_options":{"include_usage":true}}"#;
        assert!(matches!(
            check(
                Protocol::OpenaiChat,
                &ctx(true),
                client,
                &out(renamed_wrong, "")
            ),
            Word::Broken(_)
        ));
        assert!(matches!(
            check(
                Protocol::OpenaiChat,
                &ctx(true),
                client,
                &out(good, "usage")
            ),
            Word::Broken(_)
        ));
        assert!(matches!(
            check(
                Protocol::AnthropicMessages,
                &ctx(true),
                client,
                &out(good, "")
            ),
            Word::Broken(_)
        ));
        let mut client_body = out(good, "");
        client_body.body = OutboundBody::ClientBody;
        assert!(matches!(
            check(Protocol::OpenaiChat, &ctx(true), client, &client_body),
            Word::Broken(_)
        ));
        assert_eq!(
            check(Protocol::OpenaiChat, &ctx(true), b"[1]", &out(good, "")),
            Word::Unread
        );
    }
}
