//! `POST /v1/images/generations` and `GET /v1/images/files/{id}.png`: the
//! OpenAI images API, answering with real (small) PNGs.
//!
//! - **Body.** `{"prompt" (required), "model"?, "n"? (1..=10, default 1),
//!   "size"? ("auto" or "WIDTHxHEIGHT", sides 1..=4096; "auto" and the
//!   default are 1024x1024), "quality"? (standard, hd, low, medium, high,
//!   xhigh, max, auto), "response_format"? ("url", the default, or
//!   "b64_json"), "style"? (vivid, natural), "user"?}`; `"stream": true` →
//!   400 (not simulated); other fields (`background`, `output_format`, ...)
//!   are ignored: the images are always PNG.
//! - **Pictures.** Image `i` (from 0) is an 8-bit RGB PNG of ⌈W/16⌉ × ⌈H/16⌉
//!   pixels for a requested W×H (1024x1024 → 64×64, 1792x1024 → 112×64),
//!   a diagonal gradient from colour A at the top left to colour B at the
//!   bottom right, where with `seed` = FNV-1a of `<prompt without
//!   directives>#<i>` A = the low 24 bits of `seed` and B = the next 24, as
//!   0xRRGGBB ([`render`]).
//! - **Ids and links.** The id is `img-<seed as 16 hex digits>-<w>x<h>` (the
//!   PNG's pixel size): everything the picture depends on, so the link
//!   `http://<the request's Host>/v1/images/files/<id>.png` works without
//!   any state (also after a restart) and, like a vendor's signed link,
//!   needs no key. Any other name there → 404.
//! - **Answer.** `{"created": <unix seconds>, "data": [...]}` with one item
//!   per image: `{"url": <link>}` or `{"b64_json": <standard base64 of the
//!   PNG>}`, plus `"revised_prompt"` (the prompt without directives) for
//!   models whose name contains `dall-e-3`. No usage is reported.
//! - **Directives** in `prompt`. The links take no faults.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use super::{deliver, json_object, optional_choice, optional_str, required_str, Reply};
use crate::chat::unix_now;
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::tokens::fnv1a;
use crate::SimState;

/// Where the image links live; the auth layer lets these through.
pub const FILES_PREFIX: &str = "/v1/images/files/";
/// How much smaller than requested the pictures are, per side.
pub const SCALE: u32 = 16;
/// The largest requested side.
pub const MAX_SIDE: u32 = 4096;
pub const MAX_IMAGES: u64 = 10;
const QUALITIES: [&str; 8] = [
    "standard", "hd", "low", "medium", "high", "xhigh", "max", "auto",
];

/// One picture: everything it depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Picture {
    pub seed: u64,
    /// The PNG's size in pixels.
    pub width: u32,
    pub height: u32,
}

impl Picture {
    pub fn id(&self) -> String {
        format!("img-{:016x}-{}x{}", self.seed, self.width, self.height)
    }

    /// The inverse of [`Picture::id`] for `<id>.png`.
    fn from_file_name(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("img-")?.strip_suffix(".png")?;
        let (hex, size) = rest.split_once('-')?;
        if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let seed = u64::from_str_radix(hex, 16).ok()?;
        let (width, height) = parse_size(size, MAX_SIDE / SCALE)?;
        let picture = Self {
            seed,
            width,
            height,
        };
        // One spelling per picture (lower-case hex, no leading zeros).
        (format!("{}.png", picture.id()) == name).then_some(picture)
    }
}

/// `"WxH"` with both sides in 1..=max, plain digits.
fn parse_size(size: &str, max: u32) -> Option<(u32, u32)> {
    let (w, h) = size.split_once('x')?;
    let side = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u32>().ok())
            .flatten()
            .filter(|n| (1..=max).contains(n))
    };
    Some((side(w)?, side(h)?))
}

/// The PNG of `p`: the gradient described in the module docs.
pub fn render(p: Picture) -> Result<Vec<u8>, png::EncodingError> {
    let channels = |c: u64| [(c >> 16) as u8, (c >> 8) as u8, c as u8];
    let a = channels(p.seed & 0xff_ffff);
    let b = channels((p.seed >> 24) & 0xff_ffff);
    let span = u64::from((p.width + p.height).saturating_sub(2).max(1));
    let mut pixels = Vec::with_capacity(p.width as usize * p.height as usize * 3);
    for y in 0..p.height {
        for x in 0..p.width {
            let t = u64::from(x + y);
            for ch in 0..3 {
                let mixed = (u64::from(a[ch]) * (span - t) + u64::from(b[ch]) * t) / span;
                pixels.push(mixed as u8);
            }
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, p.width, p.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    Ok(out)
}

#[derive(Debug, PartialEq)]
struct Generation {
    model: String,
    /// Without directives.
    prompt: String,
    pictures: Vec<Picture>,
    b64: bool,
    directives: FaultDirectives,
}

impl Generation {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = json_object(body, Dialect::OpenAi)?;
        let mut directives = FaultDirectives::default();
        let prompt = directives.scan(required_str(&obj, "prompt")?, |_, _| false);
        let model = optional_str(&obj, "model")?
            .unwrap_or("dall-e-2")
            .to_owned();
        let n = match obj.get("n") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_IMAGES).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_request(
                        format!("'n' must be an integer from 1 to {MAX_IMAGES}."),
                        Some("n"),
                    )
                })?,
        };
        let size = optional_str(&obj, "size")?.unwrap_or("auto");
        let (w, h) = if size == "auto" {
            (1024, 1024)
        } else {
            parse_size(size, MAX_SIDE).ok_or_else(|| {
                ApiError::invalid_request(
                    format!(
                        "Invalid value for 'size': {size:?}. It must be \"auto\" or WIDTHxHEIGHT \
                         with sides from 1 to {MAX_SIDE}."
                    ),
                    Some("size"),
                )
            })?
        };
        optional_choice(&obj, "quality", &QUALITIES)?;
        optional_choice(&obj, "style", &["vivid", "natural"])?;
        let format = optional_choice(&obj, "response_format", &["url", "b64_json"])?;
        if obj.get("stream").and_then(Value::as_bool) == Some(true) {
            return Err(ApiError::invalid_request(
                "Streaming image generation is not simulated.",
                Some("stream"),
            ));
        }
        let pictures = (0..n)
            .map(|i| Picture {
                seed: fnv1a(&format!("{prompt}#{i}")),
                width: w.div_ceil(SCALE),
                height: h.div_ceil(SCALE),
            })
            .collect();
        Ok(Self {
            model,
            prompt,
            pictures,
            b64: format == Some("b64_json"),
            directives,
        })
    }

    /// The answer; links are under `root` (`http://host:port`).
    fn reply(&self, root: &str) -> Result<Reply, ApiError> {
        let revised = self.model.contains("dall-e-3");
        let data = self
            .pictures
            .iter()
            .map(|p| {
                let mut item = if self.b64 {
                    let png = render(*p).map_err(|e| {
                        ApiError::for_status(500).with_message(format!("PNG encoding failed: {e}"))
                    })?;
                    json!({"b64_json": base64::engine::general_purpose::STANDARD.encode(png)})
                } else {
                    json!({"url": format!("{root}{FILES_PREFIX}{}.png", p.id())})
                };
                if revised {
                    item["revised_prompt"] = json!(self.prompt);
                }
                Ok(item)
            })
            .collect::<Result<Vec<Value>, ApiError>>()?;
        Ok(Reply::json(
            &json!({"created": unix_now(), "data": data}),
            None,
        ))
    }
}

/// `http://<Host>` of the request, or the server's own root without one.
fn root_of(headers: &HeaderMap, fallback: &str) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty())
        .map_or_else(|| fallback.to_owned(), |h| format!("http://{h}"))
}

pub async fn generate(
    State(state): State<Arc<SimState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let gen = match Generation::parse(&body) {
        Ok(g) => g,
        Err(e) => return e.into_response(),
    };
    let root = root_of(&headers, &state.root);
    deliver(&state, Dialect::OpenAi, &gen.directives, || {
        gen.reply(&root)
    })
    .await
}

pub async fn file(Path(name): Path<String>) -> Response {
    let Some(picture) = Picture::from_file_name(&name) else {
        return ApiError::not_found(&format!("{FILES_PREFIX}{name}")).into_response();
    };
    match render(picture) {
        Ok(png) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "image/png")],
            Bytes::from(png),
        )
            .into_response(),
        Err(e) => ApiError::for_status(500)
            .with_message(format!("PNG encoding failed: {e}"))
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Fault;

    fn parse(v: Value) -> Result<Generation, ApiError> {
        Generation::parse(v.to_string().as_bytes())
    }

    /// Width, height and the RGB pixels of a PNG, read back with the png
    /// crate's decoder.
    fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut buf).expect("png frame");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    #[test]
    fn pictures_are_valid_pngs_with_the_documented_gradient() {
        let p = Picture {
            seed: 0x0000_abcd_ef12_3456,
            width: 64,
            height: 32,
        };
        let png = render(p).expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let (w, h, pixels) = decode(&png);
        assert_eq!((w, h), (64, 32));
        let at = |x: usize, y: usize| {
            let i = (y * 64 + x) * 3;
            [pixels[i], pixels[i + 1], pixels[i + 2]]
        };
        // A = low 24 bits, B = the next 24.
        assert_eq!(at(0, 0), [0x12, 0x34, 0x56]);
        assert_eq!(at(63, 31), [0xab, 0xcd, 0xef]);
        assert_eq!(render(p).expect("png"), png, "deterministic");
    }

    #[test]
    fn ids_round_trip_and_nothing_else_is_a_picture() {
        let p = Picture {
            seed: 0x0123_4567_89ab_cdef,
            width: 112,
            height: 64,
        };
        assert_eq!(p.id(), "img-0123456789abcdef-112x64");
        assert_eq!(Picture::from_file_name(&format!("{}.png", p.id())), Some(p));
        for bad in [
            "img-0123456789abcdef-112x64",
            "img-0123456789ABCDEF-112x64.png",
            "img-0123456789abcdef-0112x64.png",
            "img-0123456789abcde-112x64.png",
            "img-0123456789abcdef-257x64.png",
            "img-0123456789abcdef-0x64.png",
            "x.png",
        ] {
            assert_eq!(Picture::from_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_scale_down_and_prompts_seed_each_image() {
        let g = parse(json!({"prompt": "a red fox [[sim:latency_ms=3]]", "n": 2,
                             "size": "1792x1024"}))
        .expect("valid");
        assert_eq!(g.prompt, "a red fox");
        assert_eq!(g.pictures.len(), 2);
        assert_eq!(
            g.pictures[0],
            Picture {
                seed: fnv1a("a red fox#0"),
                width: 112,
                height: 64
            }
        );
        assert_eq!(g.pictures[1].seed, fnv1a("a red fox#1"));
        assert!(g.directives.latency.is_some());
        let g = parse(json!({"prompt": "x", "size": "100x17"})).expect("valid");
        assert_eq!((g.pictures[0].width, g.pictures[0].height), (7, 2));
        let g = parse(json!({"prompt": "x [[sim:status=500]]"})).expect("valid");
        assert_eq!((g.pictures[0].width, g.pictures[0].height), (64, 64));
        assert_eq!(g.directives.fault, Some(Fault::Status(500)));
    }

    #[test]
    fn answers_carry_links_or_base64() {
        let g = parse(json!({"prompt": "p", "model": "dall-e-3"})).expect("valid");
        let v: Value =
            serde_json::from_slice(&g.reply("http://h:1").expect("reply").body).expect("json");
        let id = g.pictures[0].id();
        assert_eq!(
            v["data"],
            json!([{"url": format!("http://h:1/v1/images/files/{id}.png"), "revised_prompt": "p"}])
        );
        assert!(v["created"].as_u64().is_some());

        let g = parse(json!({"prompt": "p", "response_format": "b64_json"})).expect("valid");
        let v: Value =
            serde_json::from_slice(&g.reply("http://h:1").expect("reply").body).expect("json");
        let png = base64::engine::general_purpose::STANDARD
            .decode(v["data"][0]["b64_json"].as_str().expect("b64"))
            .expect("base64");
        assert_eq!(png, render(g.pictures[0]).expect("png"));
        assert!(v["data"][0].get("revised_prompt").is_none());
    }

    #[test]
    fn bad_bodies_name_the_field() {
        for (body, param) in [
            (json!({"model": "m"}), "prompt"),
            (json!({"prompt": ""}), "prompt"),
            (json!({"prompt": "p", "n": 0}), "n"),
            (json!({"prompt": "p", "n": 11}), "n"),
            (json!({"prompt": "p", "size": "big"}), "size"),
            (json!({"prompt": "p", "size": "5000x10"}), "size"),
            (json!({"prompt": "p", "quality": "ultra"}), "quality"),
            (json!({"prompt": "p", "style": "noir"}), "style"),
            (
                json!({"prompt": "p", "response_format": "png"}),
                "response_format",
            ),
            (json!({"prompt": "p", "stream": true}), "stream"),
            (json!({"prompt": "p", "model": 3}), "model"),
        ] {
            let e = parse(body.clone()).expect_err(&body.to_string());
            assert_eq!(e.param, Some(param), "{body}");
        }
    }
}
