//! The simulator's audio and images are real media: ffprobe reads every
//! speech format with the intended duration, ffmpeg decodes it without an
//! error, and ffprobe reads the PNGs with their documented size. Skipped,
//! saying so, when ffprobe is not installed.

use std::future::Future;
use std::process::Command;

use serde_json::{json, Value};
use upstream_sim::{SimOptions, SimServer};

mod common;
use common::{start, within, TempFile};

async fn bounded<T>(f: impl Future<Output = T>) -> T {
    within(60, f).await
}

/// A simulator that wants no key.
async fn sim() -> SimServer {
    start(SimOptions::default()).await
}

fn have_ffprobe(what: &str) -> bool {
    let found = Command::new("ffprobe").arg("-version").output().is_ok()
        && Command::new("ffmpeg").arg("-version").output().is_ok();
    if !found {
        eprintln!("NOTICE: ffprobe/ffmpeg are not installed; skipping the {what} check");
    }
    found
}

/// Runs a tool that must be installed; its stdout and stderr.
fn run(tool: &str, args: &[&str]) -> (String, String) {
    common::run(tool, args).expect("run the tool")
}

async fn speech(sim: &SimServer, input: &str, format: &str, speed: f64) -> Vec<u8> {
    let resp = reqwest::Client::new()
        .post(format!("{}/audio/speech", sim.base_url()))
        .json(&json!({"model": "tts-1", "voice": "alloy", "input": input,
                      "response_format": format, "speed": speed}))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200, "{format}");
    resp.bytes().await.expect("audio").to_vec()
}

#[tokio::test]
async fn every_speech_format_plays_for_the_intended_duration() {
    if !have_ffprobe("speech audio") {
        return;
    }
    bounded(async {
        let sim = sim().await;
        // (input, speed) → 500 ms (the minimum), 3000 ms, 61.2 s at speed 2.
        let cases = [
            ("hi", 1.0, 500.0),
            (&*"x".repeat(50), 1.0, 3000.0),
            (&*"y".repeat(2040), 2.0, 61_200.0),
        ];
        for format in ["mp3", "opus", "aac", "flac", "wav", "pcm"] {
            for (input, speed, want_ms) in cases {
                let audio = speech(&sim, input, format, speed).await;
                let file = TempFile::write(&format!("{}-{want_ms}.{format}", input.len()), &audio);
                let raw = ["-f", "s16le", "-ar", "24000", "-ac", "1"];
                let input_args: Vec<&str> = if format == "pcm" {
                    raw.to_vec()
                } else {
                    Vec::new()
                };
                let mut probe = vec!["-v", "error"];
                probe.extend(&input_args);
                probe.extend([
                    "-show_entries",
                    "format=duration:stream=codec_type,sample_rate",
                    "-of",
                    "json",
                    file.path(),
                ]);
                let (out, errors) = run("ffprobe", &probe);
                assert!(errors.is_empty(), "{format}: ffprobe errors: {errors}");
                let v: Value = serde_json::from_str(&out).expect("ffprobe json");
                let seconds: f64 = v["format"]["duration"]
                    .as_str()
                    .and_then(|d| d.parse().ok())
                    .unwrap_or_else(|| panic!("{format}: no duration in {out}"));
                let ms = seconds * 1000.0;
                assert!(
                    (ms - want_ms).abs() <= want_ms * 0.1,
                    "{format}: {ms} ms instead of {want_ms}"
                );
                assert_eq!(v["streams"][0]["codec_type"], "audio", "{format}");
                let rate = if format == "opus" { "48000" } else { "24000" };
                assert_eq!(v["streams"][0]["sample_rate"], rate, "{format}");

                let mut decode = vec!["-v", "error"];
                decode.extend(&input_args);
                decode.extend(["-i", file.path(), "-f", "null", "-"]);
                let (_, errors) = run("ffmpeg", &decode);
                assert!(errors.is_empty(), "{format}: decode errors: {errors}");
            }
        }
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn generated_images_are_pngs_of_the_documented_size() {
    if !have_ffprobe("PNG") {
        return;
    }
    bounded(async {
        let sim = sim().await;
        for (size, want) in [
            ("1024x1024", "64,64"),
            ("1024x1792", "64,112"),
            ("100x17", "7,2"),
        ] {
            let v: Value = reqwest::Client::new()
                .post(format!("{}/images/generations", sim.base_url()))
                .json(&json!({"prompt": "a lighthouse at dusk", "size": size}))
                .send()
                .await
                .expect("send")
                .json()
                .await
                .expect("json");
            let url = v["data"][0]["url"].as_str().expect("url");
            let png = reqwest::get(url)
                .await
                .expect("get")
                .bytes()
                .await
                .expect("png");
            let file = TempFile::write(&format!("{size}.png"), &png);
            let (out, errors) = run(
                "ffprobe",
                &[
                    "-v",
                    "error",
                    "-show_entries",
                    "stream=codec_name,width,height",
                    "-of",
                    "csv=p=0",
                    file.path(),
                ],
            );
            assert!(errors.is_empty(), "ffprobe errors: {errors}");
            assert_eq!(out, format!("png,{want}"));
        }
        sim.shutdown().await;
    })
    .await;
}
