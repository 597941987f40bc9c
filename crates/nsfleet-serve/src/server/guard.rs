//! Who may ask: every request shows the server's token, and comes from a page of the
//! server's own origin, or from no page at all (a script).
//!
//! - The `Host` header must name the address listened on (or `localhost`; see [`names`]):
//!   a page of another site whose name an attacker points at this machine (DNS
//!   rebinding) sends that site's name and is refused.
//! - An `Origin` header, which a browser sends with every cross-origin request and every
//!   WebSocket, must be this server's own: no page of another origin gets an answer (and
//!   no CORS header is ever sent).
//! - The token: `Authorization: Bearer TOKEN`, or the cookie the page's first load sets
//!   from `/?token=TOKEN` (as Jupyter does), compared in constant time.

use super::http::{ApiError, Request};
use std::net::IpAddr;

pub struct Guard {
    pub token: String,
    /// `host:port` forms a request's Host may take.
    hosts: Vec<String>,
    /// `scheme://host:port` forms an Origin may take.
    origins: Vec<String>,
    /// The cookie's name: a browser keeps cookies per host, not per port, so each
    /// server's has its port in it.
    pub cookie: String,
}

impl Guard {
    /// The guard of a server on `port`, reached by `scheme` (`http`, `https`) and any of
    /// `names` (see [`names`]).
    pub fn new(token: String, scheme: &str, names: &[String], port: u16) -> Guard {
        let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
        // On the scheme's own port, browsers leave the port out of Host and Origin.
        if matches!((scheme, port), ("https", 443) | ("http", 80)) {
            hosts.extend(names.iter().cloned());
        }
        let origins = hosts.iter().map(|h| format!("{scheme}://{h}")).collect();
        Guard {
            token,
            hosts,
            origins,
            // Over HTTPS, `__Host-`: a browser takes it only with Secure, for this host
            // alone, and from no plain-HTTP page.
            cookie: match scheme {
                "https" => format!("__Host-nsfleet_token_{port}"),
                _ => format!("nsfleet_token_{port}"),
            },
        }
    }

    /// Whether `r` may be answered at all, before its token is looked at.
    pub fn check_origin(&self, r: &Request) -> Result<(), ApiError> {
        let host = r.header("host").unwrap_or("");
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(ApiError::new(
                403,
                format!(
                    "Host {host:?} is not this server's (it answers to {})",
                    self.hosts.join(", ")
                ),
            ));
        }
        // Sent by browsers with every request: a page of another site (`cross-site`), or
        // of another port of this machine (`same-site`), which the cookie would reach.
        if let Some(site @ ("same-site" | "cross-site")) = r.header("sec-fetch-site") {
            return Err(ApiError::new(
                403,
                format!("a request from a page of another origin (Sec-Fetch-Site: {site}): only this server's own pages may ask"),
            ));
        }
        if let Some(origin) = r.header("origin") {
            if !self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
                return Err(ApiError::new(
                    403,
                    format!(
                        "a request from a page of {origin:?}: only this server's own pages may ask"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether `r` shows the token, by header or by cookie.
    pub fn check_token(&self, r: &Request) -> Result<(), ApiError> {
        let shown = (r.header("authorization"))
            .and_then(|a| a.strip_prefix("Bearer "))
            .or_else(|| r.cookie(&self.cookie));
        match shown {
            None => Err(ApiError::new(
                401,
                "no token: send `Authorization: Bearer TOKEN`, or open the URL `nsfleet serve` printed",
            )),
            Some(t) if same(t.trim().as_bytes(), self.token.as_bytes()) => Ok(()),
            Some(_) => Err(ApiError::new(401, "a wrong token")),
        }
    }

    /// Whether a page load's `?token=` is the token.
    pub fn is_token(&self, shown: &str) -> bool {
        same(shown.as_bytes(), self.token.as_bytes())
    }
}

/// The names a server listening on `listen` answers to: `localhost` and the loopback
/// addresses; on another address, that address, or every address of the machine for an
/// unspecified one (`0.0.0.0`, `::`), and the machine's name; and what `--host` added.
/// A name an attacker's page could take (its own domain, pointed at this machine) is
/// never among them.
pub fn names(listen: IpAddr, hosts: &[String]) -> Vec<String> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
    if listen.is_unspecified() {
        names.extend(machine_addresses().into_iter().map(bracketed));
    } else {
        names.push(bracketed(listen));
    }
    if !listen.is_loopback() {
        names.extend(machine_name());
    }
    names.extend(hosts.iter().map(|h| host_form(h)));
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// A `--host` as a Host header writes it: lower-case, an IPv6 address in brackets.
pub fn host_form(name: &str) -> String {
    match name.parse::<std::net::Ipv6Addr>() {
        Ok(v6) => format!("[{v6}]"),
        Err(_) => name.to_ascii_lowercase(),
    }
}

/// An address as a URL's host writes it: IPv6 in brackets.
pub fn bracketed(a: IpAddr) -> String {
    match a {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    }
}

/// The machine's name (as `hostname` says it), if it has one.
pub fn machine_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().to_ascii_lowercase();
    (!name.is_empty() && name != "(none)").then_some(name)
}

/// Every address of the machine's interfaces but IPv6 link-local ones (which a Host
/// header cannot name without their interface).
fn machine_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let Ok(mut sock) = nsfleet_netlink::NlSocket::open() else {
        return out;
    };
    let mut b = nsfleet_netlink::Batch::new();
    nsfleet_netlink::rtnl::dump_addrs(&mut b, sock.next_seq());
    let _ = sock.dump(&b, |m| {
        if let Some((_, addr, _)) = nsfleet_netlink::rtnl::parse_addr(m) {
            let link_local = matches!(addr, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
            if !link_local {
                out.push(addr);
            }
        }
    });
    out
}

/// Whether `name` can be a Host header's name: an IP address, or a DNS name.
pub fn check_host_name(name: &str) -> anyhow::Result<()> {
    let dns = |n: &str| {
        n.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
    };
    let ip = name.parse::<IpAddr>().is_ok()
        || (name.strip_prefix('[').and_then(|n| n.strip_suffix(']')))
            .is_some_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok());
    if ip || (name.len() <= 253 && dns(name)) {
        return Ok(());
    }
    anyhow::bail!("expected a DNS name (like lab.example.net) or an address, without a port")
}

/// `a == b` in a time that depends on their lengths only, never on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A new token: 32 bytes of the kernel's randomness, in hex.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            path: "/".into(),
            query: HashMap::new(),
            headers: (headers.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body_length: 0,
            body: vec![],
        }
    }

    #[test]
    fn only_this_servers_host_and_origin_are_answered() {
        let answered = names("127.0.0.1".parse().unwrap(), &[]);
        let g = Guard::new("t".repeat(64), "http", &answered, 8080);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert!(
                g.check_origin(&request(&[("host", host)])).is_ok(),
                "{host}"
            );
        }
        for host in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.1", ""] {
            let e = g.check_origin(&request(&[("host", host)])).unwrap_err();
            assert_eq!(e.status, 403, "{host}");
        }
        let ok = [
            ("host", "localhost:8080"),
            ("origin", "http://localhost:8080"),
        ];
        assert!(g.check_origin(&request(&ok)).is_ok());
        for site in ["same-site", "cross-site"] {
            let r = request(&[("host", "localhost:8080"), ("sec-fetch-site", site)]);
            assert_eq!(g.check_origin(&r).unwrap_err().status, 403, "{site}");
        }
        let typed = [("host", "localhost:8080"), ("sec-fetch-site", "none")];
        assert!(g.check_origin(&request(&typed)).is_ok());
        for origin in ["http://evil.example", "https://localhost:8080", "null"] {
            let r = request(&[("host", "localhost:8080"), ("origin", origin)]);
            assert_eq!(g.check_origin(&r).unwrap_err().status, 403, "{origin}");
        }
    }

    #[test]
    fn the_token_by_header_or_cookie() {
        let token = "ab".repeat(32);
        let g = Guard::new(token.clone(), "http", &["localhost".into()], 9);
        let bearer = format!("Bearer {token}");
        assert!(g
            .check_token(&request(&[("authorization", &bearer)]))
            .is_ok());
        let cookie = format!("other=1; nsfleet_token_9={token}");
        assert!(g.check_token(&request(&[("cookie", &cookie)])).is_ok());
        let e = g.check_token(&request(&[])).unwrap_err();
        assert_eq!(e.status, 401);
        let wrong = format!("Bearer {}", "ab".repeat(31) + "ac");
        let e = g
            .check_token(&request(&[("authorization", &wrong)]))
            .unwrap_err();
        assert_eq!(
            (e.status, e.errors[0]["message"].as_str()),
            (401, Some("a wrong token"))
        );
        assert!(!g.is_token("ab") && g.is_token(&token));
        assert_eq!(new_token().unwrap().len(), 64);
    }

    #[test]
    fn a_server_on_another_address_answers_to_it_and_its_names_over_https() {
        let hosts = ["Lab.Example.net".to_string()];
        let answered = names("10.1.2.3".parse().unwrap(), &hosts);
        assert!(answered.contains(&"10.1.2.3".to_string()), "{answered:?}");
        assert!(
            answered.contains(&"lab.example.net".to_string()),
            "{answered:?}"
        );
        let g = Guard::new("t".repeat(64), "https", &answered, 8443);
        let ok = [
            ("host", "lab.example.net:8443"),
            ("origin", "https://lab.example.net:8443"),
        ];
        assert!(g.check_origin(&request(&ok)).is_ok());
        for (host, origin) in [
            ("evil.example:8443", "https://evil.example:8443"),
            ("10.1.2.3:8443", "http://10.1.2.3:8443"),
        ] {
            let r = request(&[("host", host), ("origin", origin)]);
            assert_eq!(g.check_origin(&r).unwrap_err().status, 403, "{host}");
        }
        let v6 = names("fd00::1".parse().unwrap(), &["FD00::2".into()]);
        assert!(v6.contains(&"[fd00::1]".to_string()), "{v6:?}");
        assert!(v6.contains(&"[fd00::2]".to_string()), "{v6:?}");
        // On 443, browsers send no port.
        let g = Guard::new("t".repeat(64), "https", &answered, 443);
        let bare = [
            ("host", "lab.example.net"),
            ("origin", "https://lab.example.net"),
        ];
        assert!(g.check_origin(&request(&bare)).is_ok());
        let ported = [("host", "lab.example.net:443")];
        assert!(g.check_origin(&request(&ported)).is_ok());
        for good in ["lab.example.net", "10.0.0.1", "fd00::1", "[fd00::1]", "h-1"] {
            assert!(check_host_name(good).is_ok(), "{good}");
        }
        for bad in ["lab:8443", "a..b", "-a", "a b", "", "http://lab"] {
            assert!(check_host_name(bad).is_err(), "{bad}");
        }
    }
}
