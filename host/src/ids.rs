//! Identifiers: random, prefixed by what they name (`acct_`, `tok_`, `task_`,
//! `quote_`, `evt_`, ...), so a stray id in a log says what it is.

use rand::distr::{Alphanumeric, SampleString};

/// `prefix` + 32 lowercase hex characters (122 random bits).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// Request ids sort by time, which helps when reading logs.
pub fn new_request_id() -> String {
    format!("req_{}", uuid::Uuid::now_v7().simple())
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
        assert!(super::new_id("task_").starts_with("task_"));
        assert_ne!(super::new_id("x"), super::new_id("x"));
    }
}
