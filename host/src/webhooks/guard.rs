//! Which addresses a webhook may be delivered to (SSRF guard).
//!
//! Refused: loopback, private (RFC 1918, unique-local), link-local,
//! carrier-grade NAT, unspecified, multicast and broadcast addresses — unless
//! the operator sets `[webhooks] allow_private_targets` — and cloud metadata
//! endpoints, always. The check runs at submission on the URL's resolved
//! addresses, and again at every delivery on the address actually connected
//! to (the delivery pins it), so a DNS answer that changes in between
//! (rebinding) cannot reach an internal address.

use crate::config::WebhookConfig;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Cloud metadata services: never a webhook target.
fn is_metadata(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            *v4 == Ipv4Addr::new(169, 254, 169, 254) // AWS, GCP, Azure, OpenStack
                || *v4 == Ipv4Addr::new(169, 254, 170, 2) // AWS ECS task metadata
                || *v4 == Ipv4Addr::new(100, 100, 100, 200) // Alibaba Cloud
        }
        IpAddr::V6(v6) => {
            *v6 == "fd00:ec2::254"
                .parse::<Ipv6Addr>()
                .unwrap_or(Ipv6Addr::UNSPECIFIED)
        }
    }
}

fn is_internal(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10
                || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 (benchmarking)
                || o[0] >= 240 // 240.0.0.0/4 (reserved)
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(&IpAddr::V4(v4));
            }
            let seg = v6.segments();
            // Forms that embed an IPv4 address a gateway may route to:
            // NAT64 64:ff9b::/96, 6to4 2002::/16, IPv4-compatible ::a.b.c.d.
            let embedded = if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
                Some(Ipv4Addr::new(
                    (seg[6] >> 8) as u8,
                    seg[6] as u8,
                    (seg[7] >> 8) as u8,
                    seg[7] as u8,
                ))
            } else if seg[0] == 0x2002 {
                Some(Ipv4Addr::new(
                    (seg[1] >> 8) as u8,
                    seg[1] as u8,
                    (seg[2] >> 8) as u8,
                    seg[2] as u8,
                ))
            } else if seg[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
                Some(Ipv4Addr::new(
                    (seg[6] >> 8) as u8,
                    seg[6] as u8,
                    (seg[7] >> 8) as u8,
                    seg[7] as u8,
                ))
            } else {
                None
            };
            if let Some(v4) = embedded {
                let v4 = IpAddr::V4(v4);
                return is_internal(&v4) || is_metadata(&v4);
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        }
    }
}

/// Whether one resolved address may receive deliveries.
pub fn address_allowed(ip: &IpAddr, cfg: &WebhookConfig) -> Result<(), String> {
    if is_metadata(ip) {
        return Err(format!(
            "{ip} is a cloud metadata address; webhooks cannot target it"
        ));
    }
    if is_internal(ip) && !cfg.allow_private_targets {
        return Err(format!(
            "{ip} is a loopback, private or link-local address; webhooks cannot target it (an operator can allow it with [webhooks] allow_private_targets)"
        ));
    }
    Ok(())
}

/// The URL's form: http(s), a host, no credentials.
pub fn check_url_syntax(url: &str, _cfg: &WebhookConfig) -> Result<reqwest::Url, String> {
    let u =
        reqwest::Url::parse(url).map_err(|e| format!("webhook_url `{url}` is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err("webhook_url must be an http:// or https:// URL".into());
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("webhook_url has no host".into());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("webhook_url must not carry credentials; use webhook_secret".into());
    }
    if url.len() > 2048 {
        return Err("webhook_url is longer than 2048 characters".into());
    }
    Ok(u)
}

/// Resolves the URL's host and checks every address it resolves to; returns
/// the first allowed address to connect to.
pub async fn resolve_checked(
    url: &str,
    cfg: &WebhookConfig,
) -> Result<(reqwest::Url, SocketAddr), String> {
    let u = check_url_syntax(url, cfg)?;
    let host = u
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = u.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("webhook_url host `{host}` does not resolve: {e}"))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(format!("webhook_url host `{host}` has no address"));
    }
    // Every address must pass: a name that resolves to one public and one
    // internal address could be steered to the internal one.
    for a in &addrs {
        address_allowed(&a.ip(), cfg)?;
    }
    Ok((u, addrs[0]))
}

/// The submission-time check.
pub async fn check_target(url: &str, cfg: &WebhookConfig) -> Result<(), String> {
    resolve_checked(url, cfg).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg(allow: bool) -> WebhookConfig {
        WebhookConfig {
            allow_private_targets: allow,
            timeout: Duration::from_secs(10),
            max_concurrent: 4,
            retry_schedule_secs: vec![30],
            dispatch_tick: Duration::from_secs(1),
        }
    }

    #[test]
    fn internal_addresses_need_the_operator_setting_and_metadata_never_passes() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(address_allowed(&ip, &cfg(false)).is_err(), "{ip}");
            assert!(address_allowed(&ip, &cfg(true)).is_ok(), "{ip}");
        }
        for ip in ["169.254.169.254", "100.100.100.200", "fd00:ec2::254"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(address_allowed(&ip, &cfg(true)).is_err(), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111"] {
            assert!(
                address_allowed(&ip.parse().unwrap(), &cfg(false)).is_ok(),
                "{ip}"
            );
        }
    }

    #[test]
    fn url_form() {
        let c = cfg(false);
        assert!(check_url_syntax("https://example.com/hook", &c).is_ok());
        assert!(check_url_syntax("ftp://example.com/hook", &c).is_err());
        assert!(check_url_syntax("https://user:pw@example.com/", &c).is_err());
        assert!(check_url_syntax("not a url", &c).is_err());
    }

    #[tokio::test]
    async fn literal_addresses_are_checked_without_dns() {
        assert!(check_target("http://127.0.0.1:9/x", &cfg(false))
            .await
            .is_err());
        assert!(check_target("http://127.0.0.1:9/x", &cfg(true))
            .await
            .is_ok());
        assert!(check_target("http://[::1]:9/x", &cfg(false)).await.is_err());
        assert!(
            check_target("http://169.254.169.254/latest/meta-data", &cfg(true))
                .await
                .is_err()
        );
    }
}
