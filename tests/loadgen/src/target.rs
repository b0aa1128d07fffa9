//! Where the load goes. Only loopback targets are accepted: load tests may
//! never leave this machine.

use std::net::{IpAddr, SocketAddr};

use anyhow::{bail, Context as _};
use hyper::Uri;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Loopback addresses to connect to, tried in order.
    pub addrs: Vec<SocketAddr>,
    /// `Host` header value (`host[:port]` as written in the URL).
    pub authority: String,
    /// Path and query sent on the request line.
    pub path: String,
}

/// Host name, port and the rest of an `http://` URL, checked for shape only.
#[derive(Debug, PartialEq, Eq)]
struct ParsedUrl {
    host: String,
    port: u16,
    authority: String,
    path: String,
}

fn parse_url(url: &str) -> anyhow::Result<ParsedUrl> {
    let uri: Uri = url
        .parse()
        .with_context(|| format!("invalid URL {url:?}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => bail!("only http:// URLs are supported, not {other}://"),
        None => bail!("URL {url:?} needs an http:// scheme"),
    }
    let authority = uri.authority().context("URL has no host")?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Ok(ParsedUrl {
        host,
        port: authority.port_u16().unwrap_or(80),
        authority: authority.as_str().to_owned(),
        path: uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()),
    })
}

/// Parses `url` and resolves it, refusing anything that is not loopback.
pub async fn resolve(url: &str) -> anyhow::Result<Target> {
    let parsed = parse_url(url)?;
    let addrs: Vec<SocketAddr> = if let Ok(ip) = parsed.host.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, parsed.port)]
    } else if parsed.host.eq_ignore_ascii_case("localhost") {
        tokio::net::lookup_host(("localhost", parsed.port))
            .await
            .context("resolving localhost")?
            .collect()
    } else {
        bail!(
            "refusing {:?}: load may only target 127.0.0.1, ::1 or localhost",
            parsed.host
        );
    };
    // A doctored hosts file must not turn "localhost" into a remote target.
    let addrs: Vec<SocketAddr> = addrs.into_iter().filter(|a| a.ip().is_loopback()).collect();
    if addrs.is_empty() {
        bail!("refusing {:?}: it is not a loopback address", parsed.host);
    }
    Ok(Target {
        addrs,
        authority: parsed.authority,
        path: parsed.path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_urls() {
        let p = parse_url("http://127.0.0.1:9090/v1/chat/completions?x=1").expect("parse");
        assert_eq!(
            p,
            ParsedUrl {
                host: "127.0.0.1".into(),
                port: 9090,
                authority: "127.0.0.1:9090".into(),
                path: "/v1/chat/completions?x=1".into(),
            }
        );
        let p = parse_url("http://[::1]/").expect("parse");
        assert_eq!((p.host.as_str(), p.port), ("::1", 80));
        assert!(parse_url("https://127.0.0.1/").is_err());
        assert!(parse_url("127.0.0.1:9090/v1").is_err());
    }

    #[tokio::test]
    async fn only_loopback_is_accepted() {
        for ok in [
            "http://127.0.0.1:1/",
            "http://[::1]:1/",
            "http://localhost:1/",
        ] {
            let t = resolve(ok).await.expect(ok);
            assert!(t.addrs.iter().all(|a| a.ip().is_loopback()), "{ok}");
        }
        for bad in [
            "http://10.0.0.1/",
            "http://192.168.1.1:8080/",
            "http://0.0.0.0:9090/",
            "http://example.com/",
            "http://[2001:db8::1]/",
        ] {
            assert!(resolve(bad).await.is_err(), "{bad} must be refused");
        }
    }
}
