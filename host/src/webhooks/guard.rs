//! Which addresses a webhook may be delivered to (SSRF guard).
//!
//! Refused: loopback, private (RFC 1918, unique-local), link-local,
//! carrier-grade NAT, unspecified, multicast, broadcast, documentation and
//! other special-purpose addresses — unless the operator sets `[webhooks]
//! allow_private_targets` — and cloud metadata endpoints, always. An IPv6
//! address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo,
//! ISATAP) is judged as that IPv4 address too; URL spellings of an IPv4
//! address (decimal, hex, octal) are normalised by the URL parser before
//! the check. The check runs at submission on the URL's resolved
//! addresses, and again at every delivery on the address actually connected
//! to (the delivery pins it), so a DNS answer that changes in between
//! (rebinding) cannot reach an internal address.

use crate::config::WebhookConfig;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Cloud metadata and platform services: never a webhook target, whatever
/// `allow_private_targets` says.
fn is_metadata_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    (o[0] == 169 && o[1] == 254 && (o[2] == 169 || o[2] == 170)) // AWS, GCP, Azure, OpenStack; ECS, EKS
        || v4 == Ipv4Addr::new(100, 100, 100, 200) // Alibaba Cloud
        || v4 == Ipv4Addr::new(192, 0, 0, 192) // Oracle Cloud
        || v4 == Ipv4Addr::new(168, 63, 129, 16) // Azure platform (wire server)
}

fn is_metadata(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_metadata_v4(*v4),
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            (seg[0] == 0xfd00 && seg[1] == 0x0ec2) // AWS fd00:ec2::/32
                || (seg[0] == 0xfd20 && seg[1] == 0x00ce) // GCP fd20:ce::/32
                || embedded_v4(v6).is_some_and(is_metadata_v4)
        }
    }
}

/// The IPv4 address an IPv6 one stands for, in every form a network might
/// translate or tunnel to it: v4-mapped `::ffff:a.b.c.d`, v4-compatible
/// `::a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and the local
/// `64:ff9b:1::/48`, 6to4 `2002:AABB:CCDD::/48`, Teredo `2001:0::/32` (the
/// client's address, inverted) and ISATAP interface ids `…:5efe:a.b.c.d`.
fn embedded_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let seg = v6.segments();
    let last =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if seg[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(last(seg[6], seg[7])); // v4-compatible
    }
    if seg[..5] == [0, 0, 0, 0, 0xffff] && seg[5] == 0 {
        return Some(last(seg[6], seg[7])); // SIIT
    }
    if seg[0] == 0x64 && seg[1] == 0xff9b && (seg[2] == 0 || seg[2] == 1) {
        return Some(last(seg[6], seg[7])); // NAT64
    }
    if seg[0] == 0x2002 {
        return Some(last(seg[1], seg[2])); // 6to4
    }
    if seg[0] == 0x2001 && seg[1] == 0 {
        return Some(last(!seg[6], !seg[7])); // Teredo client
    }
    if (seg[4] == 0 || seg[4] == 0x0200) && seg[5] == 0x5efe {
        return Some(last(seg[6], seg[7])); // ISATAP
    }
    None
}

fn is_internal_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 carrier-grade NAT
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24 protocol assignments
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 192.88.99.0/24 6to4 relays
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 benchmarking
        || o[0] >= 240 // 240.0.0.0/4 reserved
        || o[0] == 0
}

fn is_internal(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(*v4),
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            // Internal whatever it embeds: an interface id of the ISATAP
            // form naming a public IPv4 address leaves a unique-local or
            // link-local address just as internal.
            let internal = v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (seg[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
                || (seg[0] == 0x0100 && seg[1..4] == [0, 0, 0]); // discard 100::/64
            if internal {
                return true;
            }
            if let Some(v4) = embedded_v4(v6) {
                return is_internal_v4(v4);
            }
            seg[0] == 0x64 && seg[1] == 0xff9b // NAT64, any other form
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

/// A webhook config for tests, with private targets allowed or not.
#[cfg(test)]
pub(crate) fn tests_config(allow: bool) -> WebhookConfig {
    WebhookConfig {
        allow_private_targets: allow,
        timeout: std::time::Duration::from_secs(10),
        max_concurrent: 4,
        retry_schedule_secs: vec![30],
        dispatch_tick: std::time::Duration::from_secs(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(allow: bool) -> WebhookConfig {
        tests_config(allow)
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

    /// The metadata address in every spelling a URL or a resolver can
    /// produce: refused even where private targets are allowed.
    #[tokio::test]
    async fn metadata_endpoints_are_refused_in_every_spelling() {
        let forms = [
            "169.254.169.254",
            "[::ffff:169.254.169.254]",
            "[::ffff:a9fe:a9fe]",
            "[::169.254.169.254]",
            "[::ffff:0:a9fe:a9fe]",
            "[64:ff9b::a9fe:a9fe]",
            "[64:ff9b::169.254.169.254]",
            "[64:ff9b:1::a9fe:a9fe]",
            "[2002:a9fe:a9fe::1]",
            "[2001:0:4136:e378:8000:63bf:5601:5601]",
            "[2001:db8::5efe:a9fe:a9fe]",
            "[fe80::200:5efe:a9fe:a9fe]",
            "2852039166",
            "0xa9fea9fe",
            "0251.0376.0251.0376",
            "169.254.43518",
            "169.254.170.2",
            "100.100.100.200",
            "192.0.0.192",
            "168.63.129.16",
            "[fd00:ec2::254]",
            "[fd20:ce::254]",
        ];
        for host in forms {
            for allow in [false, true] {
                let url = format!("http://{host}/latest/meta-data/");
                let refused = check_target(&url, &cfg(allow)).await;
                assert!(
                    refused.as_ref().is_err_and(|e| e.contains("metadata")),
                    "{url} (allow_private_targets = {allow}): {refused:?}"
                );
            }
        }
    }

    #[test]
    fn special_purpose_ranges_are_internal_in_every_spelling() {
        for ip in [
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "::ffff:0:7f00:1",
            "2001:db8::1",
            "fec0::1",
            "100::1",
            // Unique-local and link-local even with an ISATAP interface id
            // that names a public address.
            "fd12:3456::5efe:808:808",
            "fe80::200:5efe:808:808",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(address_allowed(&ip, &cfg(false)).is_err(), "{ip}");
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
