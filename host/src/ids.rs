//! Identifiers: random, prefixed by what they name (`acct_`, `tok_`, `task_`,
//! `quote_`, `evt_`, ...), so a stray id in a log says what it is.

use rand::distr::{Alphanumeric, SampleString};

/// `prefix` + 32 lowercase hex characters (122 random bits).
pub fn new_id(prefix: &str) -> String {
    prefixed(prefix, uuid::Uuid::new_v4())
}

/// Request ids sort by time, which helps when reading logs.
pub fn new_request_id() -> String {
    prefixed("req_", uuid::Uuid::now_v7())
}

/// `prefix` + the id's 32 hex characters, in one allocation (every request
/// makes one; `format!` grew the string several times).
fn prefixed(prefix: &str, id: uuid::Uuid) -> String {
    let mut hex = [0u8; uuid::fmt::Simple::LENGTH];
    let mut s = String::with_capacity(prefix.len() + hex.len());
    s.push_str(prefix);
    s.push_str(id.simple().encode_lower(&mut hex));
    s
}

/// `sk-` + 48 random alphanumeric characters.
pub fn new_api_key() -> String {
    format!("sk-{}", Alphanumeric.sample_string(&mut rand::rng(), 48))
}

#[cfg(test)]
mod tests {
    #[test]
    fn shapes() {
        let k = super::new_api_key();
        assert!(k.starts_with("sk-") && k.len() == 51);
        let id = super::new_id("task_");
        assert!(id.starts_with("task_") && id.len() == 37, "{id}");
        assert!(id[5..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_ne!(super::new_id("x"), super::new_id("x"));
        let r = super::new_request_id();
        assert!(r.starts_with("req_") && r.len() == 36, "{r}");
        assert!(uuid::Uuid::parse_str(&r[4..]).is_ok_and(|u| u.get_version_num() == 7));
    }
}
