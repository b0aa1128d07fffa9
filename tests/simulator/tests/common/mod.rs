//! What the simulator's HTTP test files share: a simulator on a loopback
//! port, a bound on every test's time, and the real media tools (ffprobe,
//! ffmpeg) run on files the simulator served.

// Each test file is its own crate and uses only a part of this.
#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use upstream_sim::{SimOptions, SimServer};

pub const KEY: &str = "sk-sim-test";

/// Runs `f`, failing the test after `secs` seconds: a regression must fail,
/// not hang CI.
pub async fn within<T>(secs: u64, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("test timed out"),
    }
}

/// A simulator on a loopback port with these options.
pub async fn start(options: SimOptions) -> SimServer {
    upstream_sim::start("127.0.0.1:0".parse().expect("addr"), options)
        .await
        .expect("start simulator")
}

/// A simulator that wants [`KEY`].
pub async fn sim() -> SimServer {
    start(SimOptions {
        api_key: Some(KEY.into()),
        ..SimOptions::default()
    })
    .await
}

/// Runs a tool and returns its stdout and stderr, or `None` when it is not
/// installed; a tool that fails fails the test.
pub fn run(tool: &str, args: &[&str]) -> Option<(String, String)> {
    let out = Command::new(tool).args(args).output().ok()?;
    assert!(out.status.success(), "{tool} {args:?} failed: {out:?}");
    Some((
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    ))
}

/// A file in the temporary folder, removed when dropped.
pub struct TempFile(PathBuf);

impl TempFile {
    pub fn write(name: &str, bytes: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("upstream-sim-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).expect("write temp file");
        Self(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
