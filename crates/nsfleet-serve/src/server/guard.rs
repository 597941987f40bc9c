//! Who may ask: every request shows the server's token, and comes from a page of the
//! server's own origin, or from no page at all (a script).
//!
//! - The `Host` header must name the address listened on (or `localhost`): a page of
//!   another site whose name an attacker points at 127.0.0.1 (DNS rebinding) sends that
//!   site's name and is refused.
//! - An `Origin` header, which a browser sends with every cross-origin request and every
//!   WebSocket, must be this server's own: no page of another origin gets an answer (and
//!   no CORS header is ever sent).
//! - The token: `Authorization: Bearer TOKEN`, or the cookie the page's first load sets
//!   from `/?token=TOKEN` (as Jupyter does), compared in constant time.

use super::http::{ApiError, Request};

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
    /// The guard of a server on loopback address `listen`, port `port`: it answers to
    /// `localhost` and the loopback addresses.
    pub fn new(token: String, listen: std::net::IpAddr, port: u16) -> Guard {
        debug_assert!(listen.is_loopback(), "only loopback addresses are served");
        let names = ["localhost", "127.0.0.1", "[::1]"];
        let own = match listen {
            std::net::IpAddr::V6(a) => format!("[{a}]"),
            a => a.to_string(),
        };
        let names: Vec<String> = (names.iter().map(|n| n.to_string()))
            .chain((!names.contains(&own.as_str())).then_some(own))
            .collect();
        let hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Guard {
            token,
            hosts,
            origins,
            cookie: format!("nsfleet_token_{port}"),
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
        let g = Guard::new("t".repeat(64), "127.0.0.1".parse().unwrap(), 8080);
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
        let g = Guard::new(token.clone(), "127.0.0.1".parse().unwrap(), 9);
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
}
