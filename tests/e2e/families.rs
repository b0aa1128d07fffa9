//! The endpoint families beside chat, end to end against the simulator:
//! each answers in the shape its clients expect, reaches the vendor with the
//! vendor's model name, and is billed by what it consumed — tokens or
//! meters, at the model's prices — with the ledger adding up, and a failed
//! call costing nothing.
//!
//! Prices (tests/e2e/common; 1 CNY = 500 000 quota): text-embedding-3-small
//! 0.14 / 1M tokens, gemini-embedding-001 0.1 / 1M tokens, gpt-image-1 0.3 an
//! image (0.6 for 1024x1024/hd), tts-1 105 / 1M characters, whisper-1 0.042 a
//! minute, omni-moderation-latest 0.01 a request, rerank-v1 0.014 a search
//! unit plus 0.1 / 1M tokens.

use crate::billing::{request_id, usage_row};
use crate::common::*;
use base64::Engine;
use serde_json::{json, Value};

/// A fresh account with 10 CNY, a key for it, and the sum of what its
/// calls were charged.
struct Books {
    account: String,
    key: String,
    spent: i64,
}

impl Books {
    async fn open(env: &Env) -> Books {
        let account = env.account("10").await;
        let (_, key) = env.token_with(&account, json!({})).await;
        Books {
            account,
            key,
            spent: 0,
        }
    }

    /// The call's cost, from its usage row, after checking the ledger still
    /// adds up; counted as spent.
    async fn charged(&mut self, env: &Env, request_id: &str) -> i64 {
        let row = usage_row(env, request_id).await;
        let (balance, sum) = env.balance(&self.account).await;
        assert_eq!(balance, sum, "the ledger adds up");
        let cost = row["cost"].as_i64().unwrap();
        self.spent += cost;
        cost
    }

    /// A call the vendor failed: a 5xx, and charged nothing. The answer is
    /// handed back for its envelope.
    async fn failed_for_free(&mut self, env: &Env, r: reqwest::Response) -> reqwest::Response {
        let id = request_id(&r);
        assert!(r.status().is_server_error(), "{}", r.status());
        assert_eq!(
            self.charged(env, &id).await,
            0,
            "a failed call costs nothing"
        );
        r
    }

    /// The balance is the 10 CNY minus everything charged.
    async fn check(&self, env: &Env) {
        let (balance, sum) = env.balance(&self.account).await;
        assert_eq!(balance, sum);
        assert_eq!(balance, 5_000_000 - self.spent, "10 CNY minus the charges");
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_in_both_encodings_and_both_spellings_are_billed_by_tokens() {
    let env = Env::start().await;
    let mut books = Books::open(&env).await;
    let key = books.key.clone();

    let r = env
        .post(&key, "/v1/embeddings", json!({"model": "text-embedding-3-small", "input": ["hello big world", "hi"], "dimensions": 8}))
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "text-embedding-3-small");
    assert_eq!(v["data"][1]["index"], 1);
    let floats: Vec<f32> = v["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(floats.len(), 8);
    let sent = env.sim.requests().pop().unwrap();
    assert_eq!(sent.json().unwrap()["model"], "sim-embed");
    // Simulator: one token per word; 4 tokens at 70 000 quota per 1M.
    assert_eq!(v["usage"]["prompt_tokens"], 4);
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, ceil_div(4 * 70_000, 1_000_000));

    // base64, as the openai SDK asks by default: the same vector.
    let r = env
        .post(&key, "/v1/embeddings", json!({"model": "text-embedding-3-small", "input": "hello big world", "dimensions": 8, "encoding_format": "base64"}))
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(decoded, floats);
    books.charged(&env, &id).await;

    // An OpenAI client in front of the Gemini vendor (which reports no
    // usage: the adapter counts a token per four characters).
    let r = env
        .post(
            &key,
            "/v1/embeddings",
            json!({"model": "gemini-embedding-001", "input": "hello big world", "dimensions": 8}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 8);
    let sent = env.sim.requests().pop().unwrap();
    assert!(
        sent.path
            .ends_with("/models/sim-gemini-embed:batchEmbedContents"),
        "{}",
        sent.path
    );
    assert_eq!(v["usage"]["prompt_tokens"], 4); // 15 characters
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, ceil_div(4 * 50_000, 1_000_000));

    // A Gemini client in front of the OpenAI vendor, single and batch.
    let r = env
        .http
        .post(env.url("/v1beta/models/text-embedding-3-small:embedContent"))
        .header("x-goog-api-key", &key)
        .json(&json!({"content": {"parts": [{"text": "hello big world"}]}, "outputDimensionality": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    let values: Vec<f32> = v["embedding"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(values, floats, "same text, same vector, whichever spelling");
    books.charged(&env, &id).await;
    let r = env
        .http
        .post(env.url("/v1beta/models/gemini-embedding-001:batchEmbedContents"))
        .header("x-goog-api-key", &key)
        .json(&json!({"requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "a"}]}},
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "b"}]}},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["embeddings"].as_array().unwrap().len(), 2);
    books.charged(&env, &id).await;

    // A vendor failure costs nothing, in the client's envelope.
    let r = env
        .post(
            &key,
            "/v1/embeddings",
            json!({"model": "text-embedding-3-small", "input": "x [[sim:status=500]]"}),
        )
        .await;
    let r = books.failed_for_free(&env, r).await;
    let (code, _) = envelope(r, 502).await;
    assert_eq!(code, "upstream_error");
    books.check(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_and_speech_are_relayed_and_billed_by_their_meters() {
    let env = Env::start().await;
    let mut books = Books::open(&env).await;
    let key = books.key.clone();

    let r = env
        .post(&key, "/v1/images/generations", json!({"model": "gpt-image-1", "prompt": "an otter", "n": 2, "size": "1024x1024", "quality": "hd", "response_format": "b64_json"}))
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    let png = base64::engine::general_purpose::STANDARD
        .decode(v["data"][1]["b64_json"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        env.sim.requests().pop().unwrap().json().unwrap()["model"],
        "sim-image"
    );
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, 2 * 300_000, "two hd images at 0.6 CNY");
    assert_eq!(
        usage_row(&env, &id).await["meters"],
        json!([{"kind": "images", "quantity": 2, "detail": "1024x1024/hd"}]),
        "the usage row says what was metered"
    );

    let r = env
        .post(
            &key,
            "/v1/images/generations",
            json!({"model": "gpt-image-1", "prompt": "an otter", "response_format": "url"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert!(v["data"][0]["url"].as_str().unwrap().ends_with(".png"));
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, 150_000, "one standard image at 0.3 CNY");

    let input = "Today is a wonderful day";
    let r = env
        .post(
            &key,
            "/v1/audio/speech",
            json!({"model": "tts-1", "input": input, "voice": "alloy", "response_format": "wav"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let id = request_id(&r);
    let audio = r.bytes().await.unwrap();
    assert_eq!(&audio[..4], b"RIFF");
    let cost = books.charged(&env, &id).await;
    // 24 characters at 52 500 000 quota per 1M.
    assert_eq!(cost, ceil_div(24 * 52_500_000, 1_000_000));

    let r = env
        .post(
            &key,
            "/v1/audio/speech",
            json!({"model": "tts-1", "input": "x [[sim:status=503]]", "voice": "alloy"}),
        )
        .await;
    books.failed_for_free(&env, r).await;
    books.check(&env).await;
    env.stop().await;
}

/// A WAV file of silence: 16 kHz, 16-bit mono.
pub fn wav(millis: u32) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for _ in 0..millis * 16 {
        w.write_sample(0i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

async fn transcribe(env: &Env, key: &str, format: &str, audio: Vec<u8>) -> reqwest::Response {
    let form = reqwest::multipart::Form::new()
        .text("model", "whisper-1")
        .text("response_format", format.to_string())
        .part(
            "file",
            reqwest::multipart::Part::bytes(audio)
                .file_name("speech.wav")
                .mime_str("audio/wav")
                .unwrap(),
        );
    env.http
        .post(env.url("/v1/audio/transcriptions"))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcriptions_stream_the_upload_and_bill_the_audio_seconds() {
    let env = Env::start().await;
    let mut books = Books::open(&env).await;
    let key = books.key.clone();
    // 21 000 quota a minute, by the millisecond, rounded up.
    let price = |ms: i64| ceil_div(ms * 21_000, 60_000);

    let r = transcribe(&env, &key, "json", wav(3_000)).await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["text"],
        "Simulated transcription of 3.0 seconds of audio."
    );
    let sent = env.sim.requests().pop().unwrap();
    let form = sent.json().unwrap();
    assert_eq!(
        form["model"], "sim-whisper",
        "the vendor's model name in the form"
    );
    assert_eq!(form["file"]["size"], 96_044, "the file went through whole");
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, price(3_000));
    let row = usage_row(&env, &id).await;
    assert_eq!(
        row["meters"],
        json!([{"kind": "audio_ms", "quantity": 3000}])
    );
    assert_eq!(row.get("counted_by_gateway"), None, "the vendor's duration");

    // text answers carry no duration: the gateway's own measure of the WAV.
    let r = transcribe(&env, &key, "text", wav(2_000)).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let id = request_id(&r);
    assert!(r
        .text()
        .await
        .unwrap()
        .starts_with("Simulated transcription of 2.0"));
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, price(2_000));
    let row = usage_row(&env, &id).await;
    assert_eq!(
        row["meters"],
        json!([{"kind": "audio_ms", "quantity": 2000}])
    );
    assert_eq!(row["counted_by_gateway"], true, "measured by the gateway");

    for format in ["srt", "vtt", "verbose_json"] {
        let r = transcribe(&env, &key, format, wav(1_500)).await;
        assert_eq!(r.status(), 200, "{format}");
        let id = request_id(&r);
        let body = r.text().await.unwrap();
        assert!(body.contains("Simulated transcription"), "{format}: {body}");
        books.charged(&env, &id).await;
    }

    let r = transcribe(&env, &key, "mp3", wav(1_000)).await;
    let (code, _) = envelope(r, 400).await;
    assert_eq!(code, "invalid_request");
    books.check(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_and_moderation_answer_their_shapes_and_bill_units_and_requests() {
    let env = Env::start().await;
    let mut books = Books::open(&env).await;
    let key = books.key.clone();

    let r = env
        .post(&key, "/v1/rerank", json!({
            "model": "rerank-v1",
            "query": "capital of france",
            "documents": ["Berlin is in Germany", {"text": "Paris is the capital of France"}, "Bananas"],
            "top_n": 2,
            "return_documents": true,
        }))
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "rerank-v1");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["index"], 1);
    assert!(results[0]["relevance_score"].as_f64() >= results[1]["relevance_score"].as_f64());
    assert_eq!(
        results[0]["document"]["text"],
        "Paris is the capital of France"
    );
    assert_eq!(
        env.sim.requests().pop().unwrap().json().unwrap()["model"],
        "sim-rerank"
    );
    // One search unit (7 000) plus the tokens the vendor reported at 0.1 / 1M.
    let tokens = v["usage"]["total_tokens"].as_i64().unwrap();
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, 7_000 + ceil_div(tokens * 50_000, 1_000_000));

    let r = env
        .post(
            &key,
            "/v1/moderations",
            json!({"input": ["I love you", "violence"]}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let id = request_id(&r);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "omni-moderation-latest", "the default model");
    assert_eq!(v["results"][0]["flagged"], false);
    assert_eq!(v["results"][1]["flagged"], true);
    assert_eq!(v["results"][1]["categories"]["violence"], true);
    let cost = books.charged(&env, &id).await;
    assert_eq!(cost, 5_000, "one request at 0.01 CNY");

    let r = env
        .post(
            &key,
            "/v1/rerank",
            json!({"model": "rerank-v1", "query": "q", "documents": []}),
        )
        .await;
    let (code, _) = envelope(r, 400).await;
    assert_eq!(code, "invalid_request");
    let r = env
        .post(
            &key,
            "/v1/rerank",
            json!({"model": "rerank-v1", "query": "q [[sim:status=500]]", "documents": ["a"]}),
        )
        .await;
    books.failed_for_free(&env, r).await;
    books.check(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_that_cannot_cover_the_images_is_402_before_the_vendor_is_asked() {
    let env = Env::start().await;
    let account = env.account("0.5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    // Ten images at 0.3 CNY need 3 CNY.
    let r = env
        .post(
            &key,
            "/v1/images/generations",
            json!({"model": "gpt-image-1", "prompt": "otters", "n": 10}),
        )
        .await;
    let (code, _) = envelope(r, 402).await;
    assert_eq!(code, "insufficient_user_quota");
    assert!(env.sim.requests().is_empty());
    let (balance, sum) = env.balance(&account).await;
    assert_eq!((balance, sum), (250_000, 250_000));
    env.stop().await;
}
