//! Webhook signatures (spec §6): `sha256=` + hex HMAC-SHA256, keyed with the
//! secret, over `"<timestamp>.<raw body>"`.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Receiver-side check (used by tests and shown in the README): either
/// signature verifies, in constant time, and the timestamp is within
/// `tolerance` seconds of `now`.
pub fn verify(
    secret: &str,
    timestamp: i64,
    body: &[u8],
    header: &str,
    now: i64,
    tolerance: i64,
) -> bool {
    if (now - timestamp).abs() > tolerance {
        return false;
    }
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        // Python: hmac.new(b"secret", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        assert_eq!(
            sign("secret", 1_700_000_000, br#"{"a":1}"#),
            "sha256=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686"
        );
        let s = sign("secret", 1_700_000_000, br#"{"a":1}"#);
        assert!(verify(
            "secret",
            1_700_000_000,
            br#"{"a":1}"#,
            &s,
            1_700_000_100,
            300
        ));
        assert!(!verify(
            "secret",
            1_700_000_000,
            br#"{"a":2}"#,
            &s,
            1_700_000_000,
            300
        ));
        assert!(!verify(
            "other",
            1_700_000_000,
            br#"{"a":1}"#,
            &s,
            1_700_000_000,
            300
        ));
        assert!(!verify(
            "secret",
            1_700_000_000,
            br#"{"a":1}"#,
            &s,
            1_700_000_301,
            300
        ));
    }
}
