//! Replacing an adapter's `.wasm` under load: no call fails, each call is
//! served by one build (named in its `x-gateway-adapter` header), and a file
//! that is not a usable component — garbage, a copy caught half-written, a
//! component built for another contract — changes nothing for clients.

use crate::common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `bytes` with one more custom section: the same component, behaving the
/// same, but another file with another SHA-256 — a new build, for the
/// registry.
fn with_custom_section(bytes: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    let mut out = bytes.to_vec();
    out.push(0); // custom section id
    leb(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

/// The first 16 hex digits of the file's SHA-256, as the header shows them.
fn short_sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))[..16].to_string()
}

/// The SHA-256 (16 digits) of the `openai` adapter the registry serves, and
/// the sources of refused files.
async fn registry_state(env: &Env, reload: bool) -> (String, Vec<String>) {
    let (method, path) = if reload {
        (reqwest::Method::POST, "/admin/v1/plugins/reload")
    } else {
        (reqwest::Method::GET, "/admin/v1/plugins")
    };
    let (status, v) = env.admin(method, path, None).await;
    assert_eq!(status, 200, "{v}");
    let sha = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .and_then(|p| p["sha256"].as_str())
        .map(|s| s[..16].to_string())
        .unwrap_or_else(|| panic!("openai is not loaded: {v}"));
    let refused = v["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source"].as_str().unwrap_or("").to_string())
        .collect();
    (sha, refused)
}

/// What the clients saw: calls per serving build, and every failure.
#[derive(Default)]
struct Seen {
    by_build: BTreeMap<String, usize>,
    plain: usize,
    streamed: usize,
    failures: Vec<String>,
}

/// One client call; records which build served it, or why it failed.
async fn one_call(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    streamed: bool,
    n: usize,
) -> Result<String, String> {
    let mut body = user(
        "gpt-4o-mini",
        &format!("call {n} [[sim:words=12, chunk_delay_ms=4]]"),
    );
    if streamed {
        body["stream"] = json!(true);
    }
    let resp = http
        .post(url)
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status();
    let build = resp
        .headers()
        .get("x-gateway-adapter")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = resp.text().await.map_err(|e| format!("body: {e}"))?;
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    let build = build.ok_or("no x-gateway-adapter header")?;
    if streamed {
        if !text.contains("data: [DONE]") || text.contains("\"error\"") {
            return Err(format!("stream not whole: {text}"));
        }
    } else {
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
            .is_empty()
        {
            return Err(format!("no answer: {text}"));
        }
    }
    let sha = build
        .split("sha256:")
        .nth(1)
        .ok_or_else(|| format!("header without a sha: {build}"))?;
    Ok(sha.to_string())
}

/// Waits (bounded) until some call was served by `sha`.
async fn served_by(seen: &Mutex<Seen>, sha: &str) {
    for _ in 0..3000 {
        if seen.lock().unwrap().by_build.contains_key(sha) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no call was served by build {sha} within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_adapter_replaced_ten_times_under_load_fails_no_call() {
    let env = Env::with(Setup {
        limits: "rate_limit_requests = 1000000".into(),
        plugins: "max_instances = 64".into(),
        ..Setup::default()
    })
    .await;
    let account = env.account("1000").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let file = env.dir.path().join("adapters/openai.wasm");
    let original = std::fs::read(&file).unwrap();
    let (first, _) = registry_state(&env, false).await;
    assert_eq!(first, short_sha(&original));

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..12 {
        let (seen, stop, key) = (seen.clone(), stop.clone(), key.clone());
        let (http, url) = (env.http.clone(), env.url("/v1/chat/completions"));
        workers.push(tokio::spawn(async move {
            let streamed = w % 2 == 1;
            // Bounded: the swaps below end long before this many calls.
            for n in 0..100_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let outcome = one_call(&http, &url, &key, streamed, n).await;
                let mut seen = seen.lock().unwrap();
                match outcome {
                    Ok(sha) => {
                        *seen.by_build.entry(sha).or_default() += 1;
                        if streamed {
                            seen.streamed += 1;
                        } else {
                            seen.plain += 1;
                        }
                    }
                    Err(e) => seen.failures.push(e),
                }
            }
        }));
    }
    served_by(&seen, &first).await;

    let mut builds = BTreeSet::from([first.clone()]);
    let mut serving = first;
    for i in 0..10 {
        let build = with_custom_section(&original, "build", format!("v{i}").as_bytes());
        let sha = short_sha(&build);
        if i % 2 == 0 {
            // A deployer: write beside it, then rename over it.
            let part = env.dir.path().join("adapters/openai.wasm.part");
            std::fs::write(&part, &build).unwrap();
            std::fs::rename(&part, &file).unwrap();
        } else {
            // The naive way, caught half-way: the registry reads a truncated
            // file, refuses it, and the build before keeps serving.
            std::fs::write(&file, &build[..build.len() / 2]).unwrap();
            let (now, refused) = registry_state(&env, true).await;
            assert_eq!(now, serving, "a half-written file must not serve");
            assert!(
                refused.iter().any(|r| r.ends_with("openai.wasm")),
                "{refused:?}"
            );
            std::fs::write(&file, &build).unwrap();
        }
        let (now, refused) = registry_state(&env, true).await;
        assert_eq!(now, sha, "build v{i} serves after the reload");
        assert!(refused.is_empty(), "{refused:?}");
        served_by(&seen, &sha).await;
        builds.insert(sha.clone());
        serving = sha;
    }

    // Broken drops change nothing for clients.
    let broken: [(&str, Vec<u8>); 2] = [
        (
            "not a component",
            b"\0asm\x0d\0\x01\0 not a component".to_vec(),
        ),
        (
            "a component for another contract",
            std::fs::read(component("test-guests", "old-contract")).unwrap(),
        ),
    ];
    for (what, bytes) in &broken {
        let before = seen
            .lock()
            .unwrap()
            .by_build
            .get(&serving)
            .copied()
            .unwrap_or(0);
        std::fs::write(&file, bytes).unwrap();
        let (now, refused) = registry_state(&env, true).await;
        assert_eq!(now, serving, "{what}: the build before keeps serving");
        assert!(
            refused.iter().any(|r| r.ends_with("openai.wasm")),
            "{what}: {refused:?}"
        );
        // Calls go on being served by it.
        for _ in 0..3000 {
            if seen
                .lock()
                .unwrap()
                .by_build
                .get(&serving)
                .copied()
                .unwrap_or(0)
                > before + 12
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            seen.lock()
                .unwrap()
                .by_build
                .get(&serving)
                .copied()
                .unwrap_or(0)
                > before + 12,
            "{what}: calls stalled"
        );
    }

    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(
        seen.failures.is_empty(),
        "{} failed calls, e.g. {:?}",
        seen.failures.len(),
        seen.failures.first()
    );
    assert!(seen.plain > 0 && seen.streamed > 0);
    let unknown: Vec<&String> = seen
        .by_build
        .keys()
        .filter(|b| !builds.contains(*b))
        .collect();
    assert!(
        unknown.is_empty(),
        "calls served by unknown builds: {unknown:?}"
    );
    assert_eq!(
        seen.by_build.len(),
        11,
        "every build served: {:?}",
        seen.by_build
    );

    let l = crate::billing::ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    env.stop().await;
}

/// `gateway serve` compiles a component missing from its cache in a child
/// process (its hidden `compile-component` command): the components load
/// and serve, their native code is in the cache (and nothing half-written
/// beside it), and a file the compiler rejects is refused with the
/// compiler's own reason while the rest serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_process_compiles_in_a_child_and_refuses_what_the_compiler_rejects() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), &sim.base_url(), "");
    // A component's header, then nonsense.
    std::fs::write(
        dir.path().join("adapters").join("broken.wasm"),
        b"\0asm\x0d\0\x01\0 not a component",
    )
    .unwrap();
    let gw = GatewayProcess::start(&config);
    let line = gw.wait_for_log("broken.wasm refused").await;
    assert!(line.contains("not a valid component: "), "{line}");
    assert!(
        !line.contains("compiler process"),
        "the compiler ran and gave its reason: {line}"
    );

    let http = reqwest::Client::new();
    let (_, key) = gw.account_and_key(&http, "10").await;
    let (rid, _) = billed_call(&http, &gw.public, &key, 1)
        .await
        .expect("a call through a component compiled by the child answers 200");
    assert!(!rid.is_empty());

    let mut cached: Vec<String> = std::fs::read_dir(dir.path().join("data").join("plugin-cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    cached.sort();
    assert_eq!(
        cached.iter().filter(|n| n.ends_with(".cwasm")).count(),
        6,
        "four adapters and two policies compiled: {cached:?}"
    );
    assert!(
        cached.iter().all(|n| n.ends_with(".cwasm")),
        "no temporary file left: {cached:?}"
    );
    gw.kill();
}

/// Whether `/admin/v1/plugins` says the component `name` is mapped.
fn mapped(list: &Value, name: &str) -> bool {
    let entry = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not loaded: {list}"));
    entry["mapped"]
        .as_bool()
        .unwrap_or_else(|| panic!("no `mapped`: {entry}"))
}

/// The files of `cache` this process has mapped (`/proc/self/maps`): the
/// native code of the components it holds, and the memory images of its
/// instance slots.
fn mapped_cache_files(cache: &std::path::Path) -> BTreeSet<String> {
    let prefix = format!("{}/", cache.display());
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter_map(|path| path.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

/// A component's native code is mapped from the plugin cache by its first
/// call, not by its load: the admin view says so, and so do the process's
/// memory mappings. A cache entry that went missing meanwhile is
/// compiled again from the component's file; if that file changed too, the
/// call fails with the adapter envelope and charges nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_are_mapped_by_their_first_call_and_a_lost_cache_entry_is_rebuilt() {
    let env = Env::start().await;
    let plugins = || env.admin(reqwest::Method::GET, "/admin/v1/plugins", None);
    let (status, list) = plugins().await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names.len(), 7, "{list}");
    for name in &names {
        assert!(
            !mapped(&list, name),
            "{name} mapped before any call: {list}"
        );
    }
    let cache = env.dir.path().join("data").join("plugin-cache");
    assert_eq!(
        mapped_cache_files(&cache),
        BTreeSet::new(),
        "loading left component code mapped"
    );

    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let resp = env.chat(&key, user("gpt-4o-mini", "hello")).await;
    assert_eq!(resp.status(), 200);
    let (_, list) = plugins().await;
    assert!(mapped(&list, "openai"), "{list}");
    let openai = hex::encode(Sha256::digest(
        std::fs::read(env.dir.path().join("adapters").join("openai.wasm")).unwrap(),
    ));
    let files = mapped_cache_files(&cache);
    assert!(
        !files.is_empty() && files.iter().all(|f| f.starts_with(&openai)),
        "an openai call maps openai's code and nothing else: {files:?}"
    );
    for name in ["anthropic", "gemini", "drop-sampling", "keep-thinking"] {
        assert!(
            !mapped(&list, name),
            "{name} mapped by an openai call: {list}"
        );
    }

    // The cache entry of an unchanged file: compiled again on first use.
    let adapters = env.dir.path().join("adapters");
    let entries_of = |file: &str| -> Vec<std::path::PathBuf> {
        let sha = hex::encode(Sha256::digest(std::fs::read(adapters.join(file)).unwrap()));
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with(&sha) && name.ends_with(".cwasm")
            })
            .collect()
    };
    let anthropic = entries_of("anthropic.wasm");
    assert_eq!(anthropic.len(), 1, "{anthropic:?}");
    std::fs::remove_file(&anthropic[0]).unwrap();
    let resp = env.chat(&key, user("claude-sonnet-4-5", "hello")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(entries_of("anthropic.wasm"), anthropic, "cached again");
    let (_, list) = plugins().await;
    assert!(mapped(&list, "anthropic"), "{list}");

    // Gone from the cache and changed on disk (no reload yet): that call
    // fails, and another does not hold the failure against the component.
    let gemini = entries_of("gemini.wasm");
    assert_eq!(gemini.len(), 1, "{gemini:?}");
    std::fs::remove_file(&gemini[0]).unwrap();
    let file = adapters.join("gemini.wasm");
    let original = std::fs::read(&file).unwrap();
    std::fs::write(&file, with_custom_section(&original, "rebuilt", b"1")).unwrap();
    let before = env.balance(&account).await;
    for _ in 0..2 {
        let resp = env.chat(&key, user("gemini-2.5-flash", "hello")).await;
        let (code, message) = envelope(resp, 502).await;
        assert_eq!(code, "adapter_error");
        assert!(
            message.contains("could not be loaded")
                && message.contains("changed since it was loaded"),
            "{message}"
        );
    }
    let after = env.balance(&account).await;
    assert_eq!(after, before, "nothing charged, nothing held");
    assert_eq!(after.0, after.1, "the ledger balances");
    let (_, list) = plugins().await;
    assert!(!mapped(&list, "gemini"), "{list}");

    // The file back as it was: the next call compiles and serves it.
    std::fs::write(&file, &original).unwrap();
    let resp = env.chat(&key, user("gemini-2.5-flash", "hello")).await;
    assert_eq!(resp.status(), 200);
    let (_, list) = plugins().await;
    assert!(mapped(&list, "gemini"), "{list}");
}
