//! Finding, compiling, checking and (re)loading guest components.
//!
//! Every `*.wasm` file in the adapters and policies folders is compiled once;
//! the native code is cached in `<data_dir>/plugin-cache/`, keyed by the
//! SHA-256 of the file and the engine's compatibility hash, so a restart or a
//! reload of an unchanged file costs a file read, not a compilation. Each
//! component is linked into an `InstancePre` ([`Linked`]); requests
//! instantiate from it into a fresh store.
//!
//! Loading checks a component and asks its `describe`, then lets go of the
//! native code; the first call that needs a cached component maps it again
//! from the cache. A mapped component is about 0.8 MiB of resident memory
//! once loaded and described, so a gateway with a folder of vendors pays
//! only for the ones its channels call (the bench's, seven components of
//! which two serve: about 6 MiB less when idle).
//!
//! A component is refused, with a log line saying why, when it exports no
//! world of ours, was built against another version of the WIT package,
//! imports anything beyond the log and the WASI interfaces Rust's std needs,
//! fails `describe`, or reuses a name already loaded. A refused file never
//! stops the gateway; the rest keep serving. A refused file that replaced
//! one that had loaded (a broken build, or a copy caught half-written)
//! leaves the earlier version serving until the file changes again.

use super::bindings::adapter::exports::gateway::plugin::adapter::Descriptor;
use super::bindings::adapter::VendorAdapterPre;
use super::bindings::policy::ModelPolicyPre;
use super::bindings::types::{AuthScheme, Protocol};
use super::bindings::video::VideoVendorPre;
use super::sandbox::{guarded, Compiler, GuestFailure, GuestState, Sandbox};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use wasmtime::component::Component;

/// The WIT package version this host implements. Components must export our
/// interfaces at a version with the same major (and, before 1.0, minor).
pub const WIT_PACKAGE: &str = "gateway:plugin";
pub const WIT_VERSION: (u64, u64, u64) = (0, 2, 0);

/// WASI interfaces a guest may import: what Rust's wasm32-wasip2 std links
/// against. Sockets and HTTP are deliberately absent.
const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "gateway:plugin/log@",
    "gateway:plugin/types@",
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    Adapter,
    Video,
    Policy,
}

/// What every loaded component has in common.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    pub name: Arc<str>,
    pub version: String,
    pub kind: PluginKind,
    pub source: PathBuf,
    pub sha256: String,
}

pub struct AdapterPlugin {
    pub info: PluginInfo,
    pub vendor_protocol: Protocol,
    pub client_protocols: Vec<Protocol>,
    pub auth: AuthScheme,
    pub pre: Linked<VendorAdapterPre<GuestState>>,
    /// Idle instances kept between calls.
    pub warm: super::sandbox::Warm<super::bindings::adapter::VendorAdapter>,
    /// The requests the host may build itself for calls alike to one the
    /// adapter gave its word for (`plugins::alike`).
    pub alike: super::alike::AlikeRequests,
    /// The [`SERVED_BY`] value, made once at load (every answer carries it).
    served_by: Option<axum::http::HeaderValue>,
}

pub struct VideoPlugin {
    pub info: PluginInfo,
    pub auth: AuthScheme,
    pub pre: Linked<VideoVendorPre<GuestState>>,
}

pub struct PolicyPlugin {
    pub info: PluginInfo,
    pub summary: String,
    pub pre: Linked<ModelPolicyPre<GuestState>>,
    pub warm: super::sandbox::Warm<super::bindings::policy::ModelPolicy>,
}

/// One consistent set of loaded components. Replaced as a whole on reload;
/// requests in flight keep the set they started with.
#[derive(Default)]
pub struct Registry {
    pub adapters: foldhash::HashMap<String, Arc<AdapterPlugin>>,
    pub video: foldhash::HashMap<String, Arc<VideoPlugin>>,
    pub policies: foldhash::HashMap<String, Arc<PolicyPlugin>>,
    /// Files that were refused, with why (the same text as the log line).
    pub refused: Vec<(PathBuf, String)>,
    /// Files as last scanned, to notice changes.
    pub(crate) scan: Vec<Scanned>,
}

/// A `.wasm` file as scanned: what changes when its content may have. The
/// inode and status-change time catch a rename over the file and a copy
/// that keeps the old size and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
    changed: (i64, i64),
}

impl Scanned {
    fn of(path: PathBuf, meta: &std::fs::Metadata) -> Scanned {
        #[cfg(unix)]
        let (inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            (meta.ino(), (meta.ctime(), meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (inode, changed) = (0, (0, 0));
        Scanned {
            path,
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
            changed,
        }
    }
}

/// The header naming the component that served a call: its name, version
/// and the start of its file's SHA-256 — which build served, during a
/// rollout.
pub const SERVED_BY: &str = "x-gateway-adapter";

impl AdapterPlugin {
    /// The [`SERVED_BY`] value for the component `info` names: its name,
    /// version and the start of its hash (`None` if a guest's name or
    /// version cannot be a header value).
    fn served_by(info: &PluginInfo) -> Option<axum::http::HeaderValue> {
        let sha = info.sha256.get(..16).unwrap_or(&info.sha256);
        axum::http::HeaderValue::from_str(&format!("{}/{} sha256:{sha}", info.name, info.version))
            .ok()
    }

    /// Names this component in `resp`'s [`SERVED_BY`] header.
    pub fn mark(&self, resp: &mut axum::response::Response) {
        if let Some(v) = &self.served_by {
            resp.headers_mut().insert(SERVED_BY, v.clone());
        }
    }
}

impl Registry {
    /// Every loaded component, by name, with whether its code is mapped
    /// now (see [`Linked`]).
    pub fn infos(&self) -> Vec<(PluginInfo, bool)> {
        let mut v: Vec<(PluginInfo, bool)> = self
            .adapters
            .values()
            .map(|p| (p.info.clone(), p.pre.is_held()))
            .chain(
                self.video
                    .values()
                    .map(|p| (p.info.clone(), p.pre.is_held())),
            )
            .chain(
                self.policies
                    .values()
                    .map(|p| (p.info.clone(), p.pre.is_held())),
            )
            .collect();
        v.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        v
    }
}

/// Lists `*.wasm` files (sorted, so load order and duplicate handling are
/// deterministic) with what tells a change.
pub(crate) fn scan(dirs: &[&Path]) -> Vec<Scanned> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some("wasm") {
                continue;
            }
            if let Ok(meta) = e.metadata() {
                if meta.is_file() {
                    out.push(Scanned::of(path, &meta));
                }
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The cache key part that says which engine settings compiled an entry.
pub(crate) fn engine_key(engine: &wasmtime::Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Compiles a component, or loads its cached native code (no cache: just
/// compiles, in this process). A cache miss is compiled by `compiler`
/// ([`Compiler`]) into the cache folder and loaded from there.
fn compile(
    engine: &wasmtime::Engine,
    compiler: Compiler,
    cache_dir: Option<&Path>,
    bytes: &[u8],
    sha: &str,
) -> anyhow::Result<Component> {
    let Some(cache_dir) = cache_dir else {
        return Component::new(engine, bytes).map_err(|e| anyhow::anyhow!("{e:#}"));
    };
    let cached = cached_path(engine, cache_dir, sha);
    if let Some(c) = from_cache(engine, &cached) {
        return Ok(c);
    }
    std::fs::create_dir_all(cache_dir)?;
    let tmp = cache_dir.join(format!(".{sha}.{}.tmp", std::process::id()));
    if let Err(e) = compiler.compile(bytes, &tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &cached)?;
    // SAFETY: as in `from_cache` — the file was just written by our own
    // compiler, with this engine's code settings (a mismatch is refused
    // here, as wasmtime checks them).
    Ok(unsafe { Component::deserialize_file(engine, &cached)? })
}

/// Where the native code of the component with SHA-256 `sha` is cached.
fn cached_path(engine: &wasmtime::Engine, cache_dir: &Path, sha: &str) -> PathBuf {
    cache_dir.join(format!("{sha}-{}.cwasm", engine_key(engine)))
}

/// The cached native code at `cached`, if there is a usable one.
fn from_cache(engine: &wasmtime::Engine, cached: &Path) -> Option<Component> {
    if !cached.is_file() {
        return None;
    }
    // SAFETY: files in the cache folder are written only by this host
    // (`compile`), from components it compiled itself with this engine's
    // settings; the name carries the engine's compatibility hash.
    match unsafe { Component::deserialize_file(engine, cached) } {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(
                "plugin cache entry {} unusable ({e}); recompiling",
                cached.display()
            );
            None
        }
    }
}

/// A component's code linked against the sandbox, typed by its world's
/// bindings (`P`: `VendorAdapterPre`, `VideoVendorPre`, `ModelPolicyPre`).
///
/// A component loaded through the plugin cache is not held after its load:
/// [`Linked::get`] maps it again from the cache on first use (a few hundred
/// microseconds, once) and keeps it from then on. Should the cache entry
/// have gone or gone bad meanwhile, the source file is compiled again if it
/// still has the SHA-256 that was loaded; if it changed, the call fails
/// (the watcher's reload is about to replace this version anyway). A
/// component loaded without a cache (the adapter kit) is held from the
/// start.
pub struct Linked<P> {
    cell: tokio::sync::OnceCell<P>,
    /// Where to load it from when it is not held; `None`: always held.
    origin: Option<Origin<P>>,
}

struct Origin<P> {
    source: PathBuf,
    sha: String,
    cache_dir: PathBuf,
    /// The bindings' constructor (`VendorAdapterPre::new`, ...).
    typed: fn(wasmtime::component::InstancePre<GuestState>) -> wasmtime::Result<P>,
}

impl<P> Linked<P> {
    /// What a load keeps of `pre`, which it has checked and described:
    /// with a cache, only where to find it again; without one, `pre`.
    fn after_load(
        pre: P,
        cache_dir: Option<&Path>,
        source: &Path,
        sha: &str,
        typed: fn(wasmtime::component::InstancePre<GuestState>) -> wasmtime::Result<P>,
    ) -> Linked<P> {
        match cache_dir {
            Some(dir) => Linked {
                cell: tokio::sync::OnceCell::new(),
                origin: Some(Origin {
                    source: source.to_path_buf(),
                    sha: sha.to_string(),
                    cache_dir: dir.to_path_buf(),
                    typed,
                }),
            },
            None => Linked {
                cell: tokio::sync::OnceCell::new_with(Some(pre)),
                origin: None,
            },
        }
    }

    /// Whether the code is mapped now (for tests and the admin view).
    pub fn is_held(&self) -> bool {
        self.cell.initialized()
    }

    /// The linked code, mapped from the cache if this is its first use.
    /// `plugin` names the component in a failure.
    pub async fn get(&self, sandbox: &Arc<Sandbox>, plugin: &str) -> Result<&P, GuestFailure>
    where
        P: Send + Sync + 'static,
    {
        if let Some(pre) = self.cell.get() {
            return Ok(pre);
        }
        let Some(origin) = &self.origin else {
            // Unreachable: a `Linked` without an origin is built held.
            return Err(GuestFailure::Unloadable {
                plugin: plugin.to_string(),
                detail: "no code and no cache entry".into(),
            });
        };
        self.cell
            .get_or_try_init(|| async {
                let sandbox = sandbox.clone();
                let (source, sha, cache_dir, typed) = (
                    origin.source.clone(),
                    origin.sha.clone(),
                    origin.cache_dir.clone(),
                    origin.typed,
                );
                // File reads and, rarely, a compilation: off the workers.
                tokio::task::spawn_blocking(move || {
                    let engine = &sandbox.engine;
                    let cached = cached_path(engine, &cache_dir, &sha);
                    let component = match from_cache(engine, &cached) {
                        Some(c) => c,
                        None => {
                            let bytes = std::fs::read(&source).map_err(|e| {
                                format!(
                                    "its cache entry is gone and {} cannot be read: {e}",
                                    source.display()
                                )
                            })?;
                            if hex::encode(Sha256::digest(&bytes)) != sha {
                                return Err(format!(
                                    "its cache entry is gone and {} changed since it was loaded",
                                    source.display()
                                ));
                            }
                            compile(engine, sandbox.compiler(), Some(&cache_dir), &bytes, &sha)
                                .map_err(|e| format!("{e:#}"))?
                        }
                    };
                    let pre = sandbox
                        .linker
                        .instantiate_pre(&component)
                        .map_err(|e| format!("cannot be linked: {e:#}"))?;
                    typed(pre).map_err(|e| format!("{e:#}"))
                })
                .await
                .map_err(|e| format!("loading aborted: {e}"))?
            })
            .await
            .map_err(|detail| GuestFailure::Unloadable {
                plugin: plugin.to_string(),
                detail,
            })
    }
}

/// Which of our worlds the component exports, with the version checked.
fn detect_kind(sandbox: &Sandbox, component: &Component) -> Result<PluginKind, String> {
    let ty = component.component_type();
    let mut found = None;
    for (name, _) in ty.exports(&sandbox.engine) {
        let Some(rest) = name.strip_prefix(&format!("{WIT_PACKAGE}/")) else {
            continue;
        };
        let (iface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let kind = match iface {
            "adapter" => PluginKind::Adapter,
            "video-adapter" => PluginKind::Video,
            "policy" => PluginKind::Policy,
            _ => continue,
        };
        check_version(version).map_err(|v| {
            format!(
                "exports {WIT_PACKAGE}/{iface}@{v}, but this host implements @{}.{}.{}",
                WIT_VERSION.0, WIT_VERSION.1, WIT_VERSION.2
            )
        })?;
        if found.replace(kind).is_some() {
            return Err(
                "exports more than one gateway world; build one component per world".into(),
            );
        }
    }
    let kind = found.ok_or_else(|| {
        format!("exports none of {WIT_PACKAGE}/adapter, /video-adapter or /policy")
    })?;
    for (name, _) in ty.imports(&sandbox.engine) {
        if !ALLOWED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p)) {
            return Err(format!("imports `{name}`, which guests are not granted"));
        }
        if let Some(v) = name
            .strip_prefix(&format!("{WIT_PACKAGE}/"))
            .and_then(|r| r.split_once('@'))
        {
            check_version(v.1).map_err(|v| {
                format!(
                    "imports {WIT_PACKAGE} at @{v}, but this host implements @{}.{}.{}",
                    WIT_VERSION.0, WIT_VERSION.1, WIT_VERSION.2
                )
            })?;
        }
    }
    Ok(kind)
}

fn check_version(v: &str) -> Result<(), String> {
    let parts: Vec<u64> = v.split('.').filter_map(|p| p.parse().ok()).collect();
    let ok = match parts.as_slice() {
        [maj, min, _] if *maj == 0 => *maj == WIT_VERSION.0 && *min == WIT_VERSION.1,
        [maj, _, _] => *maj == WIT_VERSION.0,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(v.to_string())
    }
}

/// One loaded component, of whichever world it exports.
pub enum Loaded {
    Adapter(AdapterPlugin),
    Video(VideoPlugin),
    Policy(PolicyPlugin),
}

/// Loads one component from `path`, compiled without the cache, with every
/// check a folder load makes (the adapter kit's entry).
pub async fn load_file(sandbox: &Sandbox, path: &Path) -> Result<Loaded, String> {
    load_one(sandbox, None, path).await
}

async fn load_one(
    sandbox: &Sandbox,
    cache_dir: Option<&Path>,
    path: &Path,
) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let sha = hex::encode(Sha256::digest(&bytes));
    let component = {
        // Compilation is seconds of CPU; keep it off the async workers.
        let (engine, compiler, cache, sha) = (
            sandbox.engine.clone(),
            sandbox.compiler(),
            cache_dir.map(Path::to_path_buf),
            sha.clone(),
        );
        tokio::task::spawn_blocking(move || {
            compile(&engine, compiler, cache.as_deref(), &bytes, &sha)
        })
        .await
        .map_err(|e| format!("compilation aborted: {e}"))?
        .map_err(|e| format!("not a valid component: {e:#}"))?
    };
    let kind = detect_kind(sandbox, &component)?;
    let pre = sandbox
        .linker
        .instantiate_pre(&component)
        .map_err(|e| format!("cannot be linked: {e:#}"))?;
    let file_name: Arc<str> = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .into();
    let mut store = sandbox.new_store(file_name, "load");
    let info = |name: String, version: String| PluginInfo {
        name: name.into(),
        version,
        kind,
        source: path.to_path_buf(),
        sha256: sha.clone(),
    };
    let fail = |e: super::sandbox::GuestFailure| format!("describe failed: {e}");
    match kind {
        PluginKind::Adapter => {
            let pre = VendorAdapterPre::new(pre).map_err(|e| format!("{e:#}"))?;
            let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store)).map_err(fail)?;
            let d: Descriptor = guarded!(
                sandbox,
                store,
                inst.gateway_plugin_adapter().call_describe(&mut store)
            )
            .map_err(fail)?;
            check_name(&d.name)?;
            let info = info(d.name, d.version);
            Ok(Loaded::Adapter(AdapterPlugin {
                served_by: AdapterPlugin::served_by(&info),
                info,
                vendor_protocol: d.vendor_protocol,
                client_protocols: d.client_protocols,
                auth: d.auth,
                pre: Linked::after_load(pre, cache_dir, path, &sha, VendorAdapterPre::new),
                warm: super::sandbox::Warm::new(sandbox.warm_cap()),
                alike: Default::default(),
            }))
        }
        PluginKind::Video => {
            let pre = VideoVendorPre::new(pre).map_err(|e| format!("{e:#}"))?;
            let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store)).map_err(fail)?;
            let d = guarded!(
                sandbox,
                store,
                inst.gateway_plugin_video_adapter()
                    .call_describe(&mut store)
            )
            .map_err(fail)?;
            check_name(&d.name)?;
            Ok(Loaded::Video(VideoPlugin {
                info: info(d.name, d.version),
                auth: d.auth,
                pre: Linked::after_load(pre, cache_dir, path, &sha, VideoVendorPre::new),
            }))
        }
        PluginKind::Policy => {
            let pre = ModelPolicyPre::new(pre).map_err(|e| format!("{e:#}"))?;
            let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store)).map_err(fail)?;
            let d = guarded!(
                sandbox,
                store,
                inst.gateway_plugin_policy().call_describe(&mut store)
            )
            .map_err(fail)?;
            check_name(&d.name)?;
            Ok(Loaded::Policy(PolicyPlugin {
                info: info(d.name, d.version),
                summary: d.summary,
                pre: Linked::after_load(pre, cache_dir, path, &sha, ModelPolicyPre::new),
                warm: super::sandbox::Warm::new(sandbox.warm_cap()),
            }))
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "describe returned an unusable name `{}`",
            name.escape_debug()
        ))
    }
}

/// Loads every component in the folders into a new registry. A file that is
/// refused but loaded into `previous` keeps its earlier version.
pub async fn load_all(
    sandbox: &Sandbox,
    cache_dir: &Path,
    dirs: &[&Path],
    previous: Option<&Registry>,
) -> Registry {
    let scan = scan(dirs);
    let mut reg = Registry::default();
    for Scanned { path, .. } in &scan {
        match load_one(sandbox, Some(cache_dir), path).await {
            Ok(loaded) => {
                let (kind, name) = match &loaded {
                    Loaded::Adapter(p) => ("adapter", p.info.name.to_string()),
                    Loaded::Video(p) => ("video adapter", p.info.name.to_string()),
                    Loaded::Policy(p) => ("policy", p.info.name.to_string()),
                };
                let taken = reg.adapters.contains_key(&name)
                    || reg.video.contains_key(&name)
                    || reg.policies.contains_key(&name);
                if taken {
                    let why = format!("a plugin named `{name}` is already loaded");
                    tracing::error!("plugin {} refused: {why}", path.display());
                    reg.refused.push((path.clone(), why));
                    continue;
                }
                tracing::info!("loaded {kind} `{name}` from {}", path.display());
                match loaded {
                    Loaded::Adapter(p) => {
                        reg.adapters.insert(name, Arc::new(p));
                    }
                    Loaded::Video(p) => {
                        reg.video.insert(name, Arc::new(p));
                    }
                    Loaded::Policy(p) => {
                        reg.policies.insert(name, Arc::new(p));
                    }
                }
            }
            Err(why) => {
                let kept = previous.and_then(|p| reg.keep_from(p, path));
                match kept {
                    Some(sha) => tracing::error!(
                        "plugin {} refused: {why}; the version loaded before (sha256 {sha}) keeps serving",
                        path.display()
                    ),
                    None => tracing::error!("plugin {} refused: {why}", path.display()),
                }
                reg.refused.push((path.clone(), why));
            }
        }
    }
    reg.scan = scan;
    reg
}

impl Registry {
    /// Carries over what `previous` had loaded from `path`, unless its name
    /// is taken by now; returns that version's SHA-256.
    fn keep_from(&mut self, previous: &Registry, path: &Path) -> Option<String> {
        let from = |info: &PluginInfo| info.source == path;
        let taken = |reg: &Registry, name: &str| {
            reg.adapters.contains_key(name)
                || reg.video.contains_key(name)
                || reg.policies.contains_key(name)
        };
        if let Some(p) = previous.adapters.values().find(|p| from(&p.info)) {
            if !taken(self, &p.info.name) {
                self.adapters.insert(p.info.name.to_string(), p.clone());
                return Some(p.info.sha256.clone());
            }
        }
        if let Some(p) = previous.video.values().find(|p| from(&p.info)) {
            if !taken(self, &p.info.name) {
                self.video.insert(p.info.name.to_string(), p.clone());
                return Some(p.info.sha256.clone());
            }
        }
        if let Some(p) = previous.policies.values().find(|p| from(&p.info)) {
            if !taken(self, &p.info.name) {
                self.policies.insert(p.info.name.to_string(), p.clone());
                return Some(p.info.sha256.clone());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(check_version("0.2.0").is_ok());
        assert!(check_version("0.2.7").is_ok());
        assert!(check_version("0.1.0").is_err());
        assert!(check_version("0.3.0").is_err());
        assert!(check_version("1.1.0").is_err());
        assert!(check_version("").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_rewrite_that_keeps_size_and_modification_time_is_still_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        std::fs::write(&path, b"first").unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let before = scan(&[dir.path()]);
        assert_eq!(before, scan(&[dir.path()]), "nothing changed");

        // Same length, modification time put back (as `cp -p` or rsync do),
        // at a later moment than the scan: the status-change time moves. The
        // kernel's clock for it is coarse (a few ms), so rewrite until it has
        // (bounded).
        use std::os::unix::fs::MetadataExt;
        let ctime = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            (m.ctime(), m.ctime_nsec())
        };
        let scanned_at = ctime(&path);
        for _ in 0..1_000_000 {
            std::fs::write(&path, b"other").unwrap();
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(mtime).unwrap();
            if ctime(&path) != scanned_at {
                break;
            }
        }
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 5);
        let rewritten = scan(&[dir.path()]);
        assert_ne!(before, rewritten);

        // Renamed over, same length.
        let part = dir.path().join("a.wasm.part");
        std::fs::write(&part, b"third").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&part)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        std::fs::rename(&part, &path).unwrap();
        assert_ne!(rewritten, scan(&[dir.path()]));
    }

    #[test]
    fn names() {
        assert!(check_name("openai").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
    }
}
