//! In-process HTTP tests of the endpoints besides chat and video:
//! embeddings (OpenAI and Gemini), images, speech, transcription, rerank and
//! moderation — their answers, auth, errors, faults and records.

use std::future::Future;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use upstream_sim::{Fault, SimServer};

mod common;
use common::{sim, within, KEY};

/// Every test is bounded: a regression must fail, not hang CI.
async fn bounded<T>(f: impl Future<Output = T>) -> T {
    within(60, f).await
}

fn post(sim: &SimServer, path: &str, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}{path}", sim.base_url()))
        .bearer_auth(KEY)
        .json(body)
}

fn gemini(sim: &SimServer, model_action: &str, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/v1beta/models/{model_action}", sim.root_url()))
        .header("x-goog-api-key", KEY)
        .json(body)
}

async fn json_of(resp: reqwest::Response) -> Value {
    resp.json().await.expect("json body")
}

/// The numbers of a JSON array as f32 (each is the shortest spelling of an
/// f32, so this gives back the exact values).
fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .map(|x| x as f32)
        .collect()
}

#[tokio::test]
async fn embeddings_are_deterministic_recorded_and_billed() {
    bounded(async {
        let sim = sim().await;
        let body = json!({"model": "text-embedding-3-small",
                          "input": ["hello world", "bye"], "dimensions": 32});
        let resp = post(&sim, "/embeddings", &body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let v = json_of(resp).await;
        assert_eq!(v["object"], "list");
        assert_eq!(v["model"], "text-embedding-3-small");
        assert_eq!(v["data"][1]["index"], 1);
        assert_eq!(
            floats(&v["data"][0]["embedding"]),
            upstream_sim::embedding_vector("hello world", 32)
        );
        assert_eq!(v["usage"], json!({"prompt_tokens": 3, "total_tokens": 3}));

        // The SDK's default: base64 of the little-endian f32s.
        let mut b64 = body.clone();
        b64["encoding_format"] = json!("base64");
        let v = json_of(post(&sim, "/embeddings", &b64).send().await.expect("send")).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["data"][0]["embedding"].as_str().expect("a string"))
            .expect("base64");
        let decoded: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(decoded, upstream_sim::embedding_vector("hello world", 32));

        let recorded = sim.requests();
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[0].path, "/v1/embeddings");
        assert_eq!(
            recorded[0].header("authorization"),
            Some("Bearer sk-sim-test")
        );
        assert_eq!(recorded[0].json(), Some(body));
        assert_eq!(
            recorded[0].usage,
            Some(json!({"prompt_tokens": 3, "total_tokens": 3}))
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_bodies_and_keys_answer_in_the_openai_envelope() {
    bounded(async {
        let sim = sim().await;
        sim.push_fault(Fault::Status(503), 1);
        for (path, body, param) in [
            ("/embeddings", json!({"model": "m", "input": ""}), "input"),
            ("/images/generations", json!({"prompt": "p", "n": 11}), "n"),
            (
                "/audio/speech",
                json!({"model": "m", "input": "x"}),
                "voice",
            ),
            (
                "/rerank",
                json!({"model": "m", "query": "q", "documents": []}),
                "documents",
            ),
            ("/moderations", json!({"input": []}), "input"),
        ] {
            let resp = post(&sim, path, &body).send().await.expect("send");
            assert_eq!(resp.status(), 400, "{path}");
            let v = json_of(resp).await;
            assert_eq!(v["error"]["type"], "invalid_request_error", "{path}");
            assert_eq!(v["error"]["param"], param, "{path}");
        }
        let resp = reqwest::Client::new()
            .post(format!("{}/embeddings", sim.base_url()))
            .bearer_auth("sk-wrong")
            .json(&json!({"model": "m", "input": "x"}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 401);
        assert_eq!(json_of(resp).await["error"]["code"], "invalid_api_key");
        // Invalid requests left the queued fault for the next valid one.
        let resp = post(&sim, "/moderations", &json!({"input": "x"}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 503);
        let resp = post(&sim, "/moderations", &json!({"input": "x"}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            sim.requests().len(),
            8,
            "rejected requests are recorded too"
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn fault_directives_in_every_text_input() {
    bounded(async {
        let sim = sim().await;
        let cases = [
            (
                "/embeddings",
                json!({"model": "m", "input": ["ok", "x [[sim:status=429]]"]}),
            ),
            (
                "/images/generations",
                json!({"prompt": "cat [[sim:status=429]]"}),
            ),
            (
                "/audio/speech",
                json!({"model": "m", "voice": "alloy", "input": "[[sim:status=429]] hi"}),
            ),
            (
                "/rerank",
                json!({"model": "m", "query": "q [[sim:status=429]]", "documents": ["a"]}),
            ),
            ("/moderations", json!({"input": "x [[sim:status=429]]"})),
        ];
        for (path, body) in &cases {
            let resp = post(&sim, path, body).send().await.expect("send");
            assert_eq!(resp.status(), 429, "{path}");
            assert_eq!(resp.headers()["retry-after"], "7", "{path}");
            assert_eq!(json_of(resp).await["error"]["code"], "rate_limit_exceeded");
        }
        let resp = post(
            &sim,
            "/embeddings",
            &json!({"model": "m", "input": "x [[sim:status=429-quota]]"}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 429);
        assert_eq!(json_of(resp).await["error"]["code"], "insufficient_quota");
        assert!(sim.requests().iter().all(|r| r.usage.is_none()));

        let started = Instant::now();
        let resp = post(
            &sim,
            "/rerank",
            &json!({"model": "m", "query": "q [[sim:latency_ms=150]]", "documents": ["q"]}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 200);
        assert!(started.elapsed() >= Duration::from_millis(150));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn malformed_cut_and_hang() {
    bounded(async {
        let sim = sim().await;
        let body =
            |marker: &str| json!({"model": "m", "input": format!("x{marker}"), "dimensions": 4});
        let normal = post(&sim, "/embeddings", &body(""))
            .send()
            .await
            .expect("send");
        let normal = normal.bytes().await.expect("body");
        let resp = post(&sim, "/embeddings", &body(" [[sim:malformed]]"))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        let broken = resp.bytes().await.expect("body");
        assert_eq!(broken, normal.slice(..normal.len() / 2), "the first half");
        assert!(serde_json::from_slice::<Value>(&broken).is_err());
        assert!(sim.requests()[1].usage.is_none());

        let resp = post(&sim, "/embeddings", &body(" [[sim:cut]]"))
            .send()
            .await
            .expect("headers");
        assert_eq!(resp.status(), 200);
        assert!(resp.bytes().await.is_err(), "the body must break");

        sim.push_fault(Fault::Hang, 1);
        let pending = tokio::spawn(post(&sim, "/moderations", &json!({"input": "x"})).send());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!pending.is_finished(), "hang must not answer");
        sim.shutdown().await;
        let _ = pending.await;
    })
    .await;
}

#[tokio::test]
async fn gemini_embeddings_use_the_goog_key_and_envelope() {
    bounded(async {
        let sim = sim().await;
        let one = json!({"content": {"parts": [{"text": "hello"}]}, "outputDimensionality": 8});
        let resp = gemini(&sim, "gemini-embedding-001:embedContent", &one)
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        let v = json_of(resp).await;
        assert_eq!(
            floats(&v["embedding"]["values"]),
            upstream_sim::embedding_vector("hello", 8)
        );

        let batch = json!({"requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "a"}]}},
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "b"}]},
             "taskType": "RETRIEVAL_DOCUMENT"}]});
        let resp = gemini(&sim, "gemini-embedding-001:batchEmbedContents", &batch)
            .send()
            .await
            .expect("send");
        let v = json_of(resp).await;
        let embeddings = v["embeddings"].as_array().expect("embeddings");
        assert_eq!(embeddings.len(), 2);
        assert_eq!(
            floats(&embeddings[1]["values"]),
            upstream_sim::embedding_vector("b", 3072)
        );
        assert!(
            sim.requests().iter().all(|r| r.usage.is_none()),
            "no usage reported"
        );

        // A bearer token is not Gemini's scheme.
        let resp = reqwest::Client::new()
            .post(format!("{}/v1beta/models/m:embedContent", sim.root_url()))
            .bearer_auth(KEY)
            .json(&one)
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 400);
        assert_eq!(json_of(resp).await["error"]["status"], "INVALID_ARGUMENT");

        let resp = gemini(
            &sim,
            "gemini-embedding-001:embedContent",
            &json!({"content": {"parts": [{"text": "x [[sim:status=503]]"}]}}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 503);
        assert_eq!(json_of(resp).await["error"]["status"], "UNAVAILABLE");
        let resp = gemini(
            &sim,
            "gemini-embedding-001:batchEmbedContents",
            &json!({"requests": []}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 400);
        // Chat still answers on the same route.
        let resp = gemini(
            &sim,
            "gemini-x:generateContent",
            &json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 200);
        sim.shutdown().await;
    })
    .await;
}

/// Width and height of a PNG, decoded with the png crate.
fn png_size(png: &[u8]) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    (info.width, info.height)
}

#[tokio::test]
async fn images_come_as_links_or_base64_and_the_links_need_no_key() {
    bounded(async {
        let sim = sim().await;
        let resp = post(
            &sim,
            "/images/generations",
            &json!({"model": "dall-e-3", "prompt": "a lighthouse", "size": "1792x1024",
                    "quality": "hd", "style": "vivid", "n": 2}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 200);
        let v = json_of(resp).await;
        let data = v["data"].as_array().expect("data");
        assert_eq!(data.len(), 2);
        assert_eq!(data[0]["revised_prompt"], "a lighthouse");
        let url = data[0]["url"].as_str().expect("url");
        assert!(
            url.starts_with(&format!("{}/images/files/img-", sim.base_url())),
            "{url}"
        );
        assert_ne!(data[0]["url"], data[1]["url"]);
        let file = reqwest::get(url).await.expect("download");
        assert_eq!(file.status(), 200);
        assert_eq!(file.headers()["content-type"], "image/png");
        let png = file.bytes().await.expect("png");
        assert_eq!(png_size(&png), (112, 64));

        let v = json_of(
            post(
                &sim,
                "/images/generations",
                &json!({"prompt": "a lighthouse", "size": "256x256",
                        "response_format": "b64_json"}),
            )
            .send()
            .await
            .expect("send"),
        )
        .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v["data"][0]["b64_json"].as_str().expect("b64"))
            .expect("base64");
        assert_eq!(png_size(&png), (16, 16));
        assert!(v["data"][0].get("revised_prompt").is_none());

        let missing = reqwest::get(format!("{}/images/files/nope.png", sim.base_url()))
            .await
            .expect("send");
        assert_eq!(missing.status(), 404);
        let recorded = sim.requests();
        assert_eq!(recorded[1].method, "GET");
        assert!(recorded.iter().all(|r| r.usage.is_none()));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn speech_in_every_format() {
    bounded(async {
        let sim = sim().await;
        for (format, content_type) in [
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("aac", "audio/aac"),
            ("flac", "audio/flac"),
            ("wav", "audio/wav"),
            ("pcm", "audio/pcm"),
        ] {
            let resp = post(
                &sim,
                "/audio/speech",
                &json!({"model": "tts-1", "voice": "alloy", "input": "Hello there, world!",
                        "response_format": format}),
            )
            .send()
            .await
            .expect("send");
            assert_eq!(resp.status(), 200, "{format}");
            assert_eq!(resp.headers()["content-type"], content_type);
            let audio = resp.bytes().await.expect("audio");
            // 19 characters: 1140 ms.
            match format {
                "wav" => assert_eq!(audio.len(), 44 + 1140 * 48),
                "pcm" => assert_eq!(audio.len(), 1140 * 48),
                _ => assert!(!audio.is_empty()),
            }
        }
        // Without a format: mp3.
        let resp = post(
            &sim,
            "/audio/speech",
            &json!({"model": "tts-1", "voice": "alloy", "input": "x"}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.headers()["content-type"], "audio/mpeg");
        sim.shutdown().await;
    })
    .await;
}

const BOUNDARY: &str = "sim-test-boundary-7MA4YWxkTrZu0gW";

/// A multipart/form-data body: text fields, then optionally a file part
/// `(filename, content type, bytes)`.
fn form(fields: &[(&str, &str)], file: Option<(&str, &str, &[u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    if let Some((filename, content_type, bytes)) = file {
        body.extend_from_slice(&file_header(filename, content_type));
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn file_header(filename: &str, content_type: &str) -> Vec<u8> {
    format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
         Content-Type: {content_type}\r\n\r\n"
    )
    .into_bytes()
}

fn transcription(sim: &SimServer, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/audio/transcriptions", sim.base_url()))
        .bearer_auth(KEY)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
}

/// A WAV header for `data` bytes of 16-bit mono 24 kHz audio.
fn wav_header(data: u32) -> Vec<u8> {
    let mut h = b"RIFF".to_vec();
    h.extend_from_slice(&(36 + data).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&[1, 0, 1, 0]);
    h.extend_from_slice(&24_000u32.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&[2, 0, 16, 0]);
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data.to_le_bytes());
    h
}

#[tokio::test]
async fn speech_round_trips_through_transcription() {
    bounded(async {
        let sim = sim().await;
        let wav = post(
            &sim,
            "/audio/speech",
            &json!({"model": "tts-1", "voice": "alloy", "response_format": "wav",
                    "input": "x".repeat(53)}),
        )
        .send()
        .await
        .expect("send")
        .bytes()
        .await
        .expect("wav");
        let body = form(
            &[("model", "whisper-1"), ("prompt", "Names: Ada.")],
            Some(("speech.wav", "audio/wav", &wav)),
        );
        let resp = transcription(&sim, body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        // 53 characters: 3180 ms.
        assert_eq!(
            json_of(resp).await,
            json!({"text": "Simulated transcription of 3.2 seconds of audio.",
                   "usage": {"type": "duration", "seconds": 3.18}})
        );
        let recorded = sim.requests();
        let last = recorded.last().expect("recorded");
        assert_eq!(last.path, "/v1/audio/transcriptions");
        assert_eq!(
            last.json(),
            Some(json!({"model": "whisper-1", "prompt": "Names: Ada.",
                        "file": {"filename": "speech.wav", "content_type": "audio/wav",
                                 "size": wav.len()}}))
        );
        assert_eq!(
            last.usage,
            Some(json!({"type": "duration", "seconds": 3.18}))
        );

        for (format, start) in [
            ("text", "Simulated transcription of 3.2"),
            ("srt", "1\n00:00:00,000 --> 00:00:03,180\n"),
            ("vtt", "WEBVTT\n\n00:00:00.000 --> 00:00:03.180\n"),
        ] {
            let body = form(
                &[("model", "whisper-1"), ("response_format", format)],
                Some(("speech.wav", "audio/wav", &wav)),
            );
            let resp = transcription(&sim, body).send().await.expect("send");
            assert_eq!(resp.status(), 200);
            assert!(resp.headers()["content-type"]
                .to_str()
                .is_ok_and(|t| t.starts_with("text/plain")));
            let text = resp.text().await.expect("text");
            assert!(text.starts_with(start), "{format}: {text:?}");
        }

        let body = form(
            &[
                ("model", "whisper-1"),
                ("response_format", "verbose_json"),
                ("timestamp_granularities[]", "word"),
                ("timestamp_granularities[]", "segment"),
            ],
            Some(("a.mp3", "audio/mpeg", &[0; 160_000])),
        );
        let v = json_of(transcription(&sim, body).send().await.expect("send")).await;
        // Not a WAV: 160 000 bytes at 16 000 a second.
        assert_eq!(v["duration"], 10.0);
        assert_eq!(
            v["text"],
            "Simulated transcription of 10.0 seconds of audio."
        );
        assert_eq!(v["segments"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["segments"][1]["end"], 10.0);
        assert_eq!(v["words"].as_array().map(Vec::len), Some(7));
        assert_eq!(
            sim.requests()
                .last()
                .and_then(|r| r.json())
                .map(|b| b["timestamp_granularities[]"].clone()),
            Some(json!(["word", "segment"]))
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn transcription_errors_and_faults() {
    bounded(async {
        let sim = sim().await;
        let wav = [wav_header(48_000), vec![0; 48_000]].concat();
        let resp = transcription(&sim, form(&[("model", "whisper-1")], None))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 400);
        assert_eq!(json_of(resp).await["error"]["param"], "file");
        let short = [wav_header(2_000), vec![0; 2_000]].concat();
        let resp = transcription(
            &sim,
            form(
                &[("model", "whisper-1")],
                Some(("a.wav", "audio/wav", &short)),
            ),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 400);
        assert_eq!(json_of(resp).await["error"]["code"], "audio_too_short");
        let resp = post(
            &sim,
            "/audio/transcriptions",
            &json!({"model": "whisper-1"}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 400, "not multipart");

        let resp = transcription(
            &sim,
            form(
                &[("model", "whisper-1"), ("prompt", "[[sim:status=502]]")],
                Some(("a.wav", "audio/wav", &wav)),
            ),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 502);
        assert_eq!(json_of(resp).await["error"]["type"], "server_error");
        let recorded = sim.requests();
        assert_eq!(
            recorded
                .last()
                .and_then(|r| r.json())
                .map(|b| b["file"]["size"].clone()),
            Some(json!(48_044))
        );

        // A form that ends inside the file: 400, and the record says how far
        // it got.
        let mut cut = form(
            &[("model", "whisper-1")],
            Some(("a.wav", "audio/wav", &wav)),
        );
        cut.truncate(cut.len() - 100);
        let resp = transcription(&sim, cut).send().await.expect("send");
        assert_eq!(resp.status(), 400);
        let summary = sim
            .requests()
            .last()
            .and_then(|r| r.json())
            .expect("summary");
        assert_eq!(summary["model"], "whisper-1");
        assert_eq!(summary["file"]["filename"], "a.wav");
        assert!(summary["file"]["size"].as_u64().is_some_and(|n| n < 48_044));

        // The key is checked before the upload is read; its body stays empty.
        let resp = reqwest::Client::new()
            .post(format!("{}/audio/transcriptions", sim.base_url()))
            .bearer_auth("sk-wrong")
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(form(
                &[("model", "whisper-1")],
                Some(("a.wav", "audio/wav", &wav)),
            ))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 401);
        assert!(sim.requests().last().is_some_and(|r| r.body.is_empty()));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_100_mb_upload_is_streamed_and_only_summarized() {
    bounded(async {
        let sim = sim().await;
        const DATA: u32 = 100_000_000;
        const CHUNK: usize = 1 << 20;
        let mut prefix = form(&[("model", "whisper-1")], None);
        // Drop the closing boundary: the file part comes next.
        prefix.truncate(prefix.len() - format!("--{BOUNDARY}--\r\n").len());
        prefix.extend_from_slice(&file_header("big.wav", "audio/wav"));
        prefix.extend_from_slice(&wav_header(DATA));
        let suffix = format!("\r\n--{BOUNDARY}--\r\n").into_bytes();
        let zeros = Bytes::from(vec![0u8; CHUNK]);
        let mut pieces = vec![Bytes::from(prefix)];
        let mut left = DATA as usize;
        while left > 0 {
            let n = left.min(CHUNK);
            pieces.push(zeros.slice(..n));
            left -= n;
        }
        pieces.push(Bytes::from(suffix));
        let stream = futures_util::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
        let resp = transcription(&sim, reqwest::Body::wrap_stream(stream))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        // 100 000 000 bytes at 48 000 a second: 2083.333 s.
        assert_eq!(
            json_of(resp).await["text"],
            "Simulated transcription of 2083.3 seconds of audio."
        );
        let recorded = sim.requests();
        assert_eq!(recorded.len(), 1);
        assert!(recorded[0].body.len() < 200, "only a summary is kept");
        assert_eq!(
            recorded[0].json().map(|b| b["file"].clone()),
            Some(json!({"filename": "big.wav", "content_type": "audio/wav",
                        "size": u64::from(DATA) + 44}))
        );
        assert_eq!(
            recorded[0].usage,
            Some(json!({"type": "duration", "seconds": 2083.333}))
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn rerank_sorts_by_overlap_and_reports_units() {
    bounded(async {
        let sim = sim().await;
        let docs = [
            "bananas are yellow",
            "the capital of France is Paris",
            "France",
        ];
        let body = json!({"model": "jina-reranker-v2", "query": "capital of France",
                          "documents": [docs[0], {"text": docs[1]}, docs[2]],
                          "top_n": 2, "return_documents": true});
        let v = json_of(post(&sim, "/rerank", &body).send().await.expect("send")).await;
        assert_eq!(v["model"], "jina-reranker-v2");
        let results = v["results"].as_array().expect("results");
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["index"], 1);
        assert_eq!(results[0]["document"]["text"], docs[1]);
        assert_eq!(results[1]["index"], 2);
        assert_eq!(
            results[1]["relevance_score"].as_f64(),
            Some(upstream_sim::rerank_score("capital of France", "France"))
        );
        assert_eq!(v["usage"], json!({"total_tokens": 3 + 3 + 6 + 1}));
        assert_eq!(v["meta"], json!({"billed_units": {"search_units": 1}}));
        assert_eq!(sim.requests()[0].usage, Some(json!({"total_tokens": 13})));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn moderation_flags_on_request() {
    bounded(async {
        let sim = sim().await;
        let v = json_of(
            post(
                &sim,
                "/moderations",
                &json!({"model": "omni-moderation-latest",
                        "input": ["a calm lake", "some violence", "[[sim:flag=hate]] x"]}),
            )
            .send()
            .await
            .expect("send"),
        )
        .await;
        assert!(v["id"].as_str().is_some_and(|id| id.starts_with("modr-")));
        let r = v["results"].as_array().expect("results");
        assert_eq!(r.len(), 3);
        assert_eq!(r[0]["flagged"], false);
        assert_eq!(r[1]["categories"]["violence"], true);
        assert_eq!(r[1]["category_scores"]["violence"], 0.9);
        assert_eq!(r[2]["categories"]["hate"], true);
        assert_eq!(r[2]["categories"]["violence"], false);
        assert_eq!(
            r[0]["category_applied_input_types"]["sexual"],
            json!(["text"])
        );
        assert_eq!(sim.requests()[0].usage, None);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn control_routes_list_the_new_endpoints_too() {
    bounded(async {
        let sim = sim().await;
        let control = format!("http://{}/_sim/faults", sim.addr());
        let http = reqwest::Client::new();
        let queued = http
            .post(&control)
            .json(&json!({"fault": "status", "status": 429}))
            .send()
            .await
            .expect("control");
        assert_eq!(queued.status(), 200);
        let resp = post(
            &sim,
            "/rerank",
            &json!({"model": "m", "query": "q", "documents": ["d"]}),
        )
        .send()
        .await
        .expect("send");
        assert_eq!(resp.status(), 429);
        let list: Value = http
            .get(format!("http://{}/_sim/requests", sim.addr()))
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        assert_eq!(list[0]["path"], "/v1/rerank");
        assert_eq!(list[0]["usage"], Value::Null);
        sim.shutdown().await;
    })
    .await;
}
