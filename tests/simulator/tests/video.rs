//! The video task API over HTTP, as the gateway's tests will drive it, and
//! the MP4 it serves checked with the real ffprobe/ffmpeg when installed.

use std::future::Future;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use upstream_sim::{SimOptions, SimServer, VideoSpeed};

mod common;
use common::{run, start, within, TempFile, KEY};

/// Every test is bounded: a regression must fail, not hang CI.
async fn bounded<T>(f: impl Future<Output = T>) -> T {
    within(20, f).await
}

async fn sim_with(video: VideoSpeed) -> SimServer {
    start(SimOptions {
        api_key: Some(KEY.into()),
        video,
        ..SimOptions::default()
    })
    .await
}

async fn sim() -> SimServer {
    sim_with(VideoSpeed::default()).await
}

fn task_body(prompt: &str, seconds: u32, size: &str) -> Value {
    let ratio = if size.starts_with("720x") {
        "9:16"
    } else {
        "16:9"
    };
    json!({"model": "sim-video", "prompt": prompt, "duration": seconds,
           "size": size, "aspect_ratio": ratio})
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn submit_raw(sim: &SimServer, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/video/tasks", sim.base_url()))
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .expect("send")
}

async fn submit(sim: &SimServer, prompt: &str, seconds: u32, size: &str) -> String {
    let resp = submit_raw(sim, &task_body(prompt, seconds, size)).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.expect("json");
    assert_eq!(v["status"], "pending");
    v["task_id"].as_str().expect("task id").to_owned()
}

async fn poll(sim: &SimServer, id: &str) -> (u16, Value) {
    let resp = client()
        .get(format!("{}/video/tasks/{id}", sim.base_url()))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json"))
}

fn content(sim: &SimServer, id: &str) -> reqwest::RequestBuilder {
    client()
        .get(format!("{}/video/tasks/{id}/content", sim.base_url()))
        .bearer_auth(KEY)
}

async fn download(sim: &SimServer, id: &str) -> Vec<u8> {
    loop {
        let (_, v) = poll(sim, id).await;
        match v["status"].as_str() {
            Some("succeeded") => break,
            Some("pending" | "running") => {}
            other => panic!("unexpected status {other:?}"),
        }
    }
    let resp = content(sim, id).send().await.expect("send");
    assert_eq!(resp.status(), 200);
    resp.bytes().await.expect("body").to_vec()
}

#[tokio::test]
async fn a_task_succeeds_at_the_third_poll_and_serves_its_mp4() {
    bounded(async {
        let sim = sim().await;
        let id = submit(&sim, "a red fox in snow", 4, "1280x720").await;
        assert_eq!(id, "vt_1");
        assert_eq!(sim.video_task_count(), 1);

        let early = content(&sim, &id).send().await.expect("send");
        assert_eq!(early.status(), 409);
        let v: Value = early.json().await.expect("json");
        assert_eq!(v["error"]["code"], "task_not_ready");

        let (status, v) = poll(&sim, &id).await;
        assert_eq!(status, 200);
        assert_eq!(
            v,
            json!({"task_id": "vt_1", "status": "running", "progress": 33})
        );
        assert_eq!(poll(&sim, &id).await.1["progress"], 66);
        let (_, done) = poll(&sim, &id).await;
        assert_eq!(
            done,
            json!({"task_id": "vt_1", "status": "succeeded", "progress": 100, "duration": 4.0})
        );

        assert_eq!(sim.video_content_fetches(), 0);
        let resp = content(&sim, &id).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        let headers = resp.headers().clone();
        assert_eq!(headers["content-type"], "video/mp4");
        assert_eq!(headers["accept-ranges"], "bytes");
        let body = resp.bytes().await.expect("body");
        assert_eq!(headers["content-length"], body.len().to_string().as_str());
        assert_eq!(&body[4..8], b"ftyp");
        assert_eq!(sim.video_content_fetches(), 1);

        // Requests are recorded like the chat API's, key included.
        let recorded = sim.requests();
        assert_eq!(recorded.len(), 6);
        assert_eq!(recorded[0].path, "/v1/video/tasks");
        assert_eq!(recorded[0].json().expect("json")["duration"], 4);
        assert_eq!(recorded[5].path, "/v1/video/tasks/vt_1/content");
        assert_eq!(
            recorded[5].header("authorization"),
            Some("Bearer sk-sim-test")
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn ranges_resume_and_seek() {
    bounded(async {
        let sim = sim_with(VideoSpeed::Polls(1)).await;
        let id = submit(&sim, "waves", 2, "1280x720").await;
        let whole = download(&sim, &id).await;
        let len = whole.len();

        let get = |range: String| content(&sim, &id).header("range", range).send();
        let resp = get("bytes=0-99".into()).await.expect("send");
        assert_eq!(resp.status(), 206);
        assert_eq!(
            resp.headers()["content-range"],
            format!("bytes 0-99/{len}").as_str()
        );
        assert_eq!(resp.headers()["content-length"], "100");
        assert_eq!(resp.bytes().await.expect("body"), whole[..100]);

        let resp = get("bytes=-10".into()).await.expect("send");
        assert_eq!(resp.status(), 206);
        assert_eq!(resp.bytes().await.expect("body"), whole[len - 10..]);

        let resp = get(format!("bytes={}-", len - 5)).await.expect("send");
        assert_eq!(resp.status(), 206);
        assert_eq!(resp.bytes().await.expect("body"), whole[len - 5..]);

        let resp = get(format!("bytes={len}-")).await.expect("send");
        assert_eq!(resp.status(), 416);
        assert_eq!(
            resp.headers()["content-range"],
            format!("bytes */{len}").as_str()
        );

        // Several ranges are not supported: the whole file, as RFC 9110 allows.
        let resp = get("bytes=0-1,4-5".into()).await.expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.bytes().await.expect("body").len(), len);

        let head = client()
            .head(format!("{}/video/tasks/{id}/content", sim.base_url()))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("send");
        assert_eq!(head.status(), 200);
        assert_eq!(head.headers()["content-length"], len.to_string().as_str());

        // Neither the 416 nor the HEAD is a download.
        assert_eq!(sim.video_content_fetches(), 5);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_submissions_unknown_tasks_and_missing_keys() {
    bounded(async {
        let sim = sim().await;
        let mut body = task_body("x", 4, "1280x720");
        body["aspect_ratio"] = json!("4:3");
        let resp = submit_raw(&sim, &body).await;
        assert_eq!(resp.status(), 400);
        let v: Value = resp.json().await.expect("json");
        assert_eq!(v["error"]["code"], "invalid_request");
        assert!(v["error"]["message"]
            .as_str()
            .expect("message")
            .contains("aspect_ratio"));

        let resp = submit_raw(&sim, &task_body("x [[sim:submit_fail]]", 4, "1280x720")).await;
        assert_eq!(resp.status(), 500);
        let v: Value = resp.json().await.expect("json");
        assert_eq!(v["error"]["code"], "internal_error");
        assert_eq!(sim.video_task_count(), 0);

        let (status, v) = poll(&sim, "vt_99").await;
        assert_eq!(
            (status, &v["error"]["code"]),
            (404, &json!("task_not_found"))
        );
        assert_eq!(
            content(&sim, "vt_99").send().await.expect("send").status(),
            404
        );

        let resp = client()
            .post(format!("{}/video/tasks", sim.base_url()))
            .json(&task_body("x", 4, "1280x720"))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 401);
        assert_eq!(sim.video_task_count(), 0);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn directed_failures() {
    bounded(async {
        let sim = sim().await;
        let rejected = submit(&sim, "something [[sim:reject]]", 4, "1280x720").await;
        let (_, v) = poll(&sim, &rejected).await;
        assert_eq!(v["status"], "failed");
        assert_eq!(v["error"]["code"], "content_policy");
        assert!(v.get("duration").is_none());
        assert_eq!(
            content(&sim, &rejected)
                .send()
                .await
                .expect("send")
                .status(),
            409
        );

        let failed = submit(&sim, "[[sim:fail]] something", 4, "1280x720").await;
        let (_, v) = poll(&sim, &failed).await;
        assert_eq!(v["status"], "failed");
        assert_eq!(v["error"]["code"], "generation_error");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));

        let never = submit(&sim, "[[sim:never]]", 4, "1280x720").await;
        for _ in 0..6 {
            let (_, v) = poll(&sim, &never).await;
            assert_eq!(
                (&v["status"], &v["progress"]),
                (&json!("running"), &json!(50))
            );
        }

        let auth = submit(&sim, "[[sim:content_auth]]", 4, "1280x720").await;
        download_status(&sim, &auth, 401).await;

        let hang = submit(&sim, "[[sim:content_hang]]", 4, "1280x720").await;
        for _ in 0..3 {
            poll(&sim, &hang).await;
        }
        let waited = content(&sim, &hang)
            .timeout(Duration::from_millis(300))
            .send()
            .await;
        assert!(waited.is_err_and(|e| e.is_timeout()));
        assert_eq!(sim.video_content_fetches(), 0);
        // A hanging download does not hold up shutdown.
        sim.shutdown().await;
    })
    .await;
}

async fn download_status(sim: &SimServer, id: &str, want: u16) {
    for _ in 0..3 {
        poll(sim, id).await;
    }
    let resp = content(sim, id).send().await.expect("send");
    assert_eq!(resp.status(), want);
}

#[tokio::test]
async fn timed_tasks_follow_the_clock() {
    bounded(async {
        let sim = sim_with(VideoSpeed::Millis(600)).await;
        let id = submit(&sim, "clouds", 1, "1280x720").await;
        let (_, v) = poll(&sim, &id).await;
        assert_ne!(v["status"], "succeeded", "{v}");
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (_, v) = poll(&sim, &id).await;
        assert_eq!(v["status"], "succeeded");
        assert_eq!(v["duration"], 1.0);
        sim.shutdown().await;
    })
    .await;
}

fn probe(file: &str, what: &str) -> Option<String> {
    run(
        "ffprobe",
        &[
            "-v",
            "error",
            "-count_frames",
            "-show_entries",
            what,
            "-of",
            "csv=p=0",
            file,
        ],
    )
    .map(|(out, _)| out)
}

#[tokio::test]
async fn served_mp4s_play_for_the_requested_seconds() {
    if Command::new("ffprobe").arg("-version").output().is_err() {
        eprintln!("NOTICE: ffprobe is not installed; skipping the MP4 playback check");
        return;
    }
    bounded(async {
        let sim = sim_with(VideoSpeed::Polls(1)).await;
        for (seconds, size, want_dims) in [(4, "1280x720", "160,90"), (12, "720x1280", "90,160")] {
            let id = submit(&sim, "a lighthouse at dusk", seconds, size).await;
            let mp4 = download(&sim, &id).await;
            let file = TempFile::write(&format!("{seconds}s.mp4"), &mp4);
            let path = file.path();

            let (duration, _) = run(
                "ffprobe",
                &[
                    "-v",
                    "error",
                    "-show_entries",
                    "format=duration",
                    "-of",
                    "csv=p=0",
                    path,
                ],
            )
            .expect("ffprobe");
            let duration: f64 = duration.parse().expect("a duration");
            assert!(
                (duration - f64::from(seconds)).abs() <= 0.1,
                "{seconds} s clip lasts {duration} s"
            );

            let (streams, errors) =
                run("ffprobe", &["-v", "error", "-show_streams", path]).expect("ffprobe");
            assert!(streams.contains("codec_type=video"), "{streams}");
            assert!(streams.contains("codec_name=h264"), "{streams}");
            assert!(errors.is_empty(), "ffprobe errors: {errors}");

            let stream = probe(file.path(), "stream=width,height,nb_read_frames").expect("ffprobe");
            assert_eq!(stream, format!("{want_dims},{}", seconds * 4));

            let (_, decode_errors) =
                run("ffmpeg", &["-v", "error", "-i", path, "-f", "null", "-"]).expect("ffmpeg");
            assert!(decode_errors.is_empty(), "decode errors: {decode_errors}");
        }
        sim.shutdown().await;
    })
    .await;
}
