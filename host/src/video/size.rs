//! Frame sizes and aspect ratios for video requests.

/// `"1280x720"` → `(1280, 720)`.
pub fn parse_size(text: &str) -> Option<(u32, u32)> {
    let (w, h) = text.split_once('x')?;
    let w: u32 = w.parse().ok()?;
    let h: u32 = h.parse().ok()?;
    (w > 0 && h > 0).then_some((w, h))
}

/// `16:9` for landscape, `9:16` for portrait, derived from a size.
pub fn ratio_of(size: &str) -> Option<&'static str> {
    let (w, h) = parse_size(size)?;
    Some(if w >= h { "16:9" } else { "9:16" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1280x720"), Some((1280, 720)));
        assert_eq!(parse_size("0x720"), None);
        assert_eq!(parse_size("720p"), None);
        assert_eq!(ratio_of("720x1280"), Some("9:16"));
        assert_eq!(ratio_of("1792x1024"), Some("16:9"));
    }
}
