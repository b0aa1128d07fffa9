//! The edge under attack: half-sent requests, over-long heads, garbage on
//! the wire. The gateway runs as its own process here so that its file
//! descriptors and memory can be read from `/proc` without the test's own.

use crate::common::*;
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Reads what the gateway sends until it closes (bounded).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The status and the envelope of a raw HTTP answer.
fn parse_answer(raw: &str) -> (u16, Value) {
    let status = raw
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"));
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(from), 0))?;
    socket.connect(to).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_half_sent_requests_from_one_address_starve_nobody() {
    const ATTACK: usize = 3_000;
    const PER_ADDRESS: usize = 500;
    // The test holds its side of every connection.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config_with_limits(
        dir.path(),
        &sim.base_url(),
        &format!("max_connections_per_ip = {PER_ADDRESS}\nheader_read_timeout_secs = 600"),
        "",
    );
    let gw = GatewayProcess::start(&config);
    let public: SocketAddr = gw.public.parse().unwrap();
    let http = reqwest::Client::new();
    let (_, key) = gw.account_and_key(&http, "10").await;
    let (fds_before, rss_before) = gw.descriptors_and_rss_kib();

    // The attacker: one address, thousands of connections, each with half a
    // request head that will never be finished.
    let attacker = Ipv4Addr::new(127, 0, 0, 1);
    let mut held = Vec::new();
    let mut refused = 0;
    for i in 0..ATTACK {
        let Ok(mut s) = connect_from(attacker, public).await else {
            refused += 1;
            continue;
        };
        let half = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Attack: {i}\r\nContent-Le"
        );
        if s.write_all(half.as_bytes()).await.is_err() {
            refused += 1;
        }
        held.push(s);
    }
    // Those over the per-address cap were answered 503 with the envelope.
    let mut answered = 0;
    for s in held.iter_mut().skip(PER_ADDRESS).take(20) {
        let (status, v) = parse_answer(&read_to_close(s).await);
        assert_eq!(status, 503);
        assert_eq!(v["error"]["code"], "too_many_connections");
        answered += 1;
    }
    assert_eq!(answered, 20);

    // A normal client from another address is served at once.
    let normal = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    for _ in 0..5 {
        let r = normal
            .post(format!("http://{public}/v1/chat/completions"))
            .bearer_auth(&key)
            .json(&user("gpt-4o-mini", "still there?"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    // Bounded: the gateway holds at most the capped connections' sockets,
    // and its memory grew by little.
    let (fds, rss) = gw.descriptors_and_rss_kib();
    assert!(
        fds <= fds_before + PER_ADDRESS + 64,
        "descriptors: {fds_before} before, {fds} during the attack"
    );
    assert!(
        rss < rss_before + 64 * 1024,
        "resident memory: {rss_before} KiB before, {rss} KiB during the attack"
    );
    eprintln!(
        "{ATTACK} half-sent requests ({refused} refused at connect): descriptors {fds_before} -> {fds}, RSS {rss_before} -> {rss} KiB"
    );
    drop(held);
    gw.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_never_finishes_gets_408_and_the_connection_closes() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config_with_limits(
        dir.path(),
        &sim.base_url(),
        "header_read_timeout_secs = 1\nkeepalive_idle_timeout_secs = 1",
        "",
    );
    let gw = GatewayProcess::start(&config);
    let public: SocketAddr = gw.public.parse().unwrap();
    let mut s = TcpStream::connect(public).await.unwrap();
    s.write_all(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n")
        .await
        .unwrap();
    // The gateway's timer (one second, in its own process) ends it.
    let (status, v) = parse_answer(&read_to_close(&mut s).await);
    assert_eq!(status, 408);
    assert_eq!(v["error"]["code"], "request_timeout");
    // A kept-alive connection with no next request is closed, silently,
    // after its idle timeout.
    let mut idle = TcpStream::connect(public).await.unwrap();
    idle.write_all(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await
        .unwrap();
    let answers = read_to_close(&mut idle).await;
    assert_eq!(answers.matches("HTTP/1.1 ").count(), 1, "{answers}");
    assert_eq!(parse_answer(&answers).0, 401);
    gw.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_heads_get_the_envelope() {
    let env = Env::with(Setup {
        limits: "max_header_bytes = 8192".into(),
        ..Setup::default()
    })
    .await;
    let addr = env.gw.public_addr;
    let raw = |bytes: Vec<u8>| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        read_to_close(&mut s).await
    };

    let answer = raw(b"HELLO WORLD\r\n\r\n".to_vec()).await;
    let (status, v) = parse_answer(&answer);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(v["error"]["code"], "invalid_request");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("(request id: "));
    assert!(answer.to_lowercase().contains("x-request-id: "));

    let mut big = b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n".to_vec();
    for i in 0..400 {
        big.extend_from_slice(format!("X-Padding-{i}: {}\r\n", "a".repeat(40)).as_bytes());
    }
    big.extend_from_slice(b"\r\n");
    let (status, v) = parse_answer(&raw(big).await);
    assert_eq!(status, 431);
    assert_eq!(v["error"]["code"], "request_header_fields_too_large");

    // Requests that parse are untouched by any of this.
    let key = env.key().await;
    let ok = env
        .http
        .get(env.url("/v1/models"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    env.stop().await;
}

/// A request head for `path` with a declared body length and a key.
fn head(path: &str, key: &str, content_type: &str, length: usize) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {key}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_are_refused_before_they_are_read() {
    let env = Env::with(Setup {
        limits: "body_idle_timeout_secs = 1".into(),
        ..Setup::default()
    })
    .await;
    let addr = env.gw.public_addr;
    let funded = env.key().await;
    let broke = env.account("0").await;
    let (_, broke_key) = env.token_with(&broke, json!({})).await;
    // Only the head is sent: each answer comes without the body.
    let send_head = |bytes: Vec<u8>| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        parse_answer(&read_to_close(&mut s).await)
    };

    // A declared length over the limit: 413 at once.
    let (status, v) = send_head(head(
        "/v1/chat/completions",
        &funded,
        "application/json",
        200 * 1024 * 1024,
    ))
    .await;
    assert_eq!(status, 413);
    assert_eq!(v["error"]["code"], "request_too_large");

    // An account that cannot pay: 402 before a byte of the upload is read.
    let (status, v) = send_head(head(
        "/v1/audio/transcriptions",
        &broke_key,
        "multipart/form-data; boundary=x",
        100 * 1024 * 1024,
    ))
    .await;
    assert_eq!(status, 402);
    assert_eq!(v["error"]["code"], "insufficient_user_quota");

    // A body that stops arriving: 408 after the idle timeout (one second,
    // the gateway's own timer).
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&head(
        "/v1/chat/completions",
        &funded,
        "application/json",
        1000,
    ))
    .await
    .unwrap();
    s.write_all(br#"{"model": "gpt-4o-mini", "mess"#)
        .await
        .unwrap();
    let (status, v) = parse_answer(&read_to_close(&mut s).await);
    assert_eq!(status, 408);
    assert_eq!(v["error"]["code"], "request_timeout");
    assert!(env.sim.requests().is_empty(), "nothing reached the vendor");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_pin_no_more_than_the_body_budget() {
    const BUDGET_MIB: usize = 48;
    const UPLOADS: usize = 8;
    const SENT_MIB: usize = 24;
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config_with_limits(
        dir.path(),
        &sim.base_url(),
        &format!(
            "max_body_bytes = {}\nmax_buffered_body_bytes = {}\nbody_idle_timeout_secs = 2",
            32 << 20,
            BUDGET_MIB << 20
        ),
        "",
    );
    let gw = GatewayProcess::start(&config);
    let public: SocketAddr = gw.public.parse().unwrap();
    let http = reqwest::Client::new();
    let (_, key) = gw.account_and_key(&http, "10").await;
    let before = gw.peak_rss_kib();

    // Eight paying clients each start a 30 MiB body, send 24 MiB of it and
    // stall: 192 MiB offered, at most the 48 MiB budget held.
    let uploads: Vec<_> = (0..UPLOADS)
        .map(|_| {
            let key = key.clone();
            tokio::spawn(async move {
                let mut s = TcpStream::connect(public).await.unwrap();
                s.write_all(&head(
                    "/v1/chat/completions",
                    &key,
                    "application/json",
                    30 << 20,
                ))
                .await
                .unwrap();
                let chunk = vec![b' '; 1 << 16];
                // The gateway stops reading when the budget is full: the
                // write stalls (bounded), then the idle timeout ends it.
                let _ = tokio::time::timeout(Duration::from_secs(15), async {
                    for _ in 0..(SENT_MIB << 4) {
                        if s.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                })
                .await;
                let (status, _) = parse_answer(&read_to_close(&mut s).await);
                status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for u in uploads {
        statuses.push(u.await.unwrap());
    }
    let peak = gw.peak_rss_kib();
    eprintln!("slow uploads: peak RSS {before} -> {peak} KiB; answers {statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 408 || *s == 503),
        "each stalled upload ends with 408 or 503: {statuses:?}"
    );
    assert!(
        peak < before + ((BUDGET_MIB as u64) << 10) + 40 * 1024,
        "peak RSS {peak} KiB vs {before} KiB before: the budget is {BUDGET_MIB} MiB"
    );

    // The budget is free again: a normal call is served.
    let r = http
        .post(format!("http://{public}/v1/chat/completions"))
        .bearer_auth(&key)
        .json(&user("gpt-4o-mini", "after the storm"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    gw.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_transcription_upload_is_held_once() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), &sim.base_url(), "");
    let gw = GatewayProcess::start(&config);
    let http = reqwest::Client::new();
    let (_, key) = gw.account_and_key(&http, "10").await;
    let audio = crate::families::wav(3_200_000); // 102.4 MB, 53 minutes
    let size = audio.len() as u64;
    let before = gw.peak_rss_kib();
    let form = reqwest::multipart::Form::new()
        .text("model", "whisper-1")
        .part(
            "file",
            reqwest::multipart::Part::bytes(audio)
                .file_name("long.wav")
                .mime_str("audio/wav")
                .unwrap(),
        );
    let r = http
        .post(format!("http://{}/v1/audio/transcriptions", gw.public))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["text"].as_str().unwrap().contains("3200.0 seconds"),
        "{v}"
    );
    let sent = sim.requests().pop().unwrap();
    assert_eq!(
        sent.json().unwrap()["file"]["size"],
        size,
        "the whole file went on"
    );
    // Through a guest with a 64 MiB cap, and held once: the peak grew by
    // about the file, never by two copies of it.
    let grew = (gw.peak_rss_kib() - before) << 10;
    eprintln!("100 MB upload: peak RSS grew by {} MiB", grew >> 20);
    assert!(
        grew < size * 3 / 2,
        "peak grew by {grew} bytes for a {size}-byte upload"
    );
    gw.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_body_too_large_for_the_adapter_is_413_not_502() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let before = env.balance(&account).await;
    // 20 MiB of text: under the 128 MiB body limit, over what a guest is
    // given (a quarter of its memory).
    let big = user("gpt-4o-mini", &"a".repeat(20 << 20));
    let (code, msg) = envelope(env.chat(&key, big).await, 413).await;
    assert_eq!(code, "request_too_large");
    assert!(msg.contains("adapters translate bodies of up to"), "{msg}");
    assert!(env.sim.requests().is_empty());
    assert_eq!(env.balance(&account).await, before, "nothing held");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_stream_is_dropped_and_billed_what_was_relayed() {
    const WORDS: i64 = 200_000;
    // The simulator renders the whole answer before its first byte, which
    // takes seconds on a loaded machine: the head may take that long.
    let env = Env::with(Setup {
        limits: "write_timeout_secs = 1\nstream_idle_timeout_secs = 60".into(),
        ..Setup::default()
    })
    .await;
    let account = env.account("50").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let body = json!({
        "model": "gpt-4o-mini",
        "stream": true,
        "messages": [{"role": "user", "content": format!("a long story [[sim:words={WORDS}]]")}],
    })
    .to_string();
    // A small receive window, so the answer backs up into the gateway soon.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(env.gw.public_addr).await.unwrap();
    s.write_all(&head(
        "/v1/chat/completions",
        &key,
        "application/json",
        body.len(),
    ))
    .await
    .unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut start = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut start))
        .await
        .unwrap()
        .unwrap();
    let start = String::from_utf8_lossy(&start[..n]).to_lowercase();
    assert!(start.starts_with("http/1.1 200"), "{start}");
    let rid = start
        .lines()
        .find_map(|l| l.strip_prefix("x-request-id: "))
        .unwrap()
        .trim()
        .to_string();

    // The client reads nothing more but keeps the connection open. After a
    // second without progress the gateway drops it, stops the vendor
    // stream and settles.
    let row = crate::billing::usage_row(&env, &rid).await;
    assert_eq!(row["status"], 200);
    assert!(
        row["error"].as_str().unwrap().contains("stopped reading"),
        "{row}"
    );
    assert_eq!(row["counted_by_gateway"], true);
    let output = row["output_tokens"].as_i64().unwrap();
    eprintln!(
        "stopped reader: billed {output} output tokens after {} ms",
        row["latency_ms"]
    );
    assert!(
        output > 0 && output < WORDS / 2,
        "billed {output} tokens: what was relayed, not the {WORDS} the vendor would have made"
    );
    let l = crate::billing::ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    // The connection is closed: what was buffered drains, then the end.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the gateway closed the connection");
    // The gateway serves the next call as usual.
    let r = env.chat(&key, user("gpt-4o-mini", "still there?")).await;
    assert_eq!(r.status(), 200);
    env.stop().await;
}
