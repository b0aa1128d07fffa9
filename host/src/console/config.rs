//! `[console]` and `[console.smtp]`: read and checked here, kept apart from
//! `config.rs` so the console's settings stay with the console. Without a
//! `[console]` section there is no console listener at all.

use crate::config::{invalid, secret, ConfigError};
use serde::Deserialize;
use std::net::SocketAddr;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsole {
    listen: String,
    /// The address people open, for the links in e-mail; by default
    /// `http://<listen>`.
    #[serde(default)]
    public_url: Option<String>,
    /// Mark the session cookie `Secure`. Browsers keep Secure cookies of
    /// `http://127.0.0.1` and `http://localhost` (trustworthy origins); turn
    /// it off only to reach a plain-http console by another name.
    #[serde(default = "yes")]
    secure_cookies: bool,
    #[serde(default = "day")]
    verify_link_ttl_secs: u64,
    #[serde(default = "week")]
    session_ttl_secs: u64,
    #[serde(default = "five")]
    login_attempts_per_email: u32,
    #[serde(default = "twenty")]
    login_attempts_per_ip: u32,
    #[serde(default = "fifteen_minutes")]
    login_window_secs: u64,
    #[serde(default)]
    smtp: Option<RawSmtp>,
}

fn yes() -> bool {
    true
}
fn day() -> u64 {
    24 * 3600
}
fn week() -> u64 {
    7 * 24 * 3600
}
fn five() -> u32 {
    5
}
fn twenty() -> u32 {
    20
}
fn fifteen_minutes() -> u64 {
    900
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSmtp {
    host: String,
    #[serde(default)]
    port: Option<u16>,
    from: String,
    #[serde(default)]
    username: Option<String>,
    /// A secret: `env:VAR` reads it from the environment.
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    tls: SmtpTls,
    #[serde(default = "ten")]
    timeout_secs: u64,
}

fn ten() -> u64 {
    10
}

/// How the SMTP connection is protected.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// Plain text (a local relay or test sink only); port 25 by default.
    None,
    /// Upgrade with STARTTLS, required; port 587 by default.
    #[default]
    Starttls,
    /// TLS from the first byte; port 465 by default.
    Tls,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleConfig {
    pub listen: SocketAddr,
    /// Without a trailing slash; `None`: `http://` and the bound address.
    pub public_url: Option<String>,
    pub secure_cookies: bool,
    pub verify_link_ttl_secs: i64,
    pub session_ttl_secs: i64,
    pub login_attempts_per_email: u32,
    pub login_attempts_per_ip: u32,
    pub login_window_secs: i64,
    /// Without it sign-up answers that no e-mail can be sent.
    pub smtp: Option<SmtpConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SmtpConfig {
    pub host: String,
    pub port: u16,
    pub from: String,
    pub credentials: Option<(String, String)>,
    pub tls: SmtpTls,
    pub timeout_secs: u64,
}

impl RawConsole {
    pub(crate) fn resolve(
        self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ConsoleConfig, ConfigError> {
        let listen: SocketAddr = self.listen.parse().map_err(|_| {
            invalid(
                "console.listen",
                format!("`{}` is not an IP:port address", self.listen),
            )
        })?;
        let public_url = self.public_url.map(|u| u.trim_end_matches('/').to_string());
        if let Some(u) = &public_url {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(invalid(
                    "console.public_url",
                    "must start with http:// or https://",
                ));
            }
        }
        let secs = |field: &str, v: u64| {
            if (1..=365 * 24 * 3600).contains(&v) {
                Ok(v as i64)
            } else {
                Err(invalid(field, "must be between 1 and 31536000"))
            }
        };
        let count = |field: &str, v: u32| {
            if v == 0 {
                Err(invalid(field, "must be greater than 0"))
            } else {
                Ok(v)
            }
        };
        let smtp = self
            .smtp
            .map(|s| -> Result<SmtpConfig, ConfigError> {
                if s.host.trim().is_empty() {
                    return Err(invalid("console.smtp.host", "must not be empty"));
                }
                if s.from.parse::<lettre::message::Mailbox>().is_err() {
                    return Err(invalid(
                        "console.smtp.from",
                        format!("`{}` is not an e-mail address", s.from),
                    ));
                }
                let credentials = match (s.username, s.password) {
                    (Some(u), Some(p)) => Some((u, secret("console.smtp.password", &p, env)?)),
                    (None, None) => None,
                    _ => {
                        return Err(invalid(
                            "console.smtp",
                            "give both `username` and `password`, or neither",
                        ))
                    }
                };
                let port = s.port.unwrap_or(match s.tls {
                    SmtpTls::None => 25,
                    SmtpTls::Starttls => 587,
                    SmtpTls::Tls => 465,
                });
                Ok(SmtpConfig {
                    host: s.host,
                    port,
                    from: s.from,
                    credentials,
                    tls: s.tls,
                    timeout_secs: secs("console.smtp.timeout_secs", s.timeout_secs)? as u64,
                })
            })
            .transpose()?;
        Ok(ConsoleConfig {
            listen,
            public_url,
            secure_cookies: self.secure_cookies,
            verify_link_ttl_secs: secs("console.verify_link_ttl_secs", self.verify_link_ttl_secs)?,
            session_ttl_secs: secs("console.session_ttl_secs", self.session_ttl_secs)?,
            login_attempts_per_email: count(
                "console.login_attempts_per_email",
                self.login_attempts_per_email,
            )?,
            login_attempts_per_ip: count(
                "console.login_attempts_per_ip",
                self.login_attempts_per_ip,
            )?,
            login_window_secs: secs("console.login_window_secs", self.login_window_secs)?,
            smtp,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    /// The example documents `[console]` commented out (off by default);
    /// uncommented, it parses, with the documented values.
    #[test]
    fn the_example_console_section_parses_when_uncommented() {
        let example = include_str!("../../../gateway.example.toml");
        let start = example.find("# [console]\n").unwrap();
        let end = start + example[start..].find("\n\n").unwrap();
        let mut text = String::new();
        for line in example.lines() {
            let offset = line.as_ptr() as usize - example.as_ptr() as usize;
            if (start..end).contains(&offset) {
                // Only the keys and headers; the prose stays a comment.
                let u = line.trim_start_matches('#').trim_start();
                let key = u
                    .split_once(" = ")
                    .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
                text.push_str(if u.starts_with('[') || key { u } else { line });
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
        let env = |name: &str| Some(format!("value-of-{name}"));
        let config = Config::from_toml(&text, Path::new("/cfg"), &env).unwrap();
        let console = config.console.unwrap();
        assert_eq!(console.listen.to_string(), "127.0.0.1:8082");
        assert_eq!(
            console.public_url.as_deref(),
            Some("https://console.example.com")
        );
        assert_eq!(console.login_attempts_per_email, 5);
        let smtp = console.smtp.unwrap();
        assert_eq!(smtp.port, 587);
        assert_eq!(smtp.tls, super::SmtpTls::Starttls);
        assert_eq!(
            smtp.credentials,
            Some(("gateway".into(), "value-of-SMTP_PASSWORD".into()))
        );
        // Without the section there is no console.
        let plain = Config::from_toml(example, Path::new("/cfg"), &env).unwrap();
        assert!(plain.console.is_none());
    }
}
