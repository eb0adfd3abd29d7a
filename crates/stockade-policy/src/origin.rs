//! Exact network origins: scheme, host, port.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The scheme of an [`Origin`]: only plain HTTP and HTTPS are ever allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// `http`, default port 80.
    Http,
    /// `https`, default port 443.
    Https,
}

impl Scheme {
    /// The scheme's default port.
    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme as written in a URL.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// An exact origin: scheme, lower-cased host and explicit port.
///
/// Parsing accepts `scheme://host[:port]` with an optional single trailing `/`, and refuses
/// wildcards, userinfo, paths, queries and fragments. [`Display`](fmt::Display) always prints
/// the port, so `parse(display(o)) == o`.
///
/// Hosts are canonical so that equal origins compare equal: names are lower-cased, IPv6
/// literals are printed in RFC 5952 form (`[::1]`), and a host whose last label is numeric must
/// be a canonical dotted-quad IPv4 address (`127.1`, `2130706433` and `0x7f.0.0.1` are refused
/// because resolvers read them as addresses).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    scheme: Scheme,
    host: String,
    port: u16,
}

/// Why a string is not an exact origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OriginError {
    /// The scheme is missing or is not `http`/`https`.
    #[error("origin `{0}`: scheme must be `http` or `https`")]
    Scheme(String),
    /// The host part is empty.
    #[error("origin `{0}`: host is empty")]
    EmptyHost(String),
    /// `user@` or `user:pass@` before the host.
    #[error("origin `{0}`: userinfo is not allowed")]
    Userinfo(String),
    /// A `*` anywhere in the host.
    #[error("origin `{0}`: wildcards are not allowed, name one exact host")]
    Wildcard(String),
    /// Anything after the authority but a lone `/`.
    #[error("origin `{0}`: path, query and fragment are not allowed")]
    PathQueryFragment(String),
    /// A port that is not a number in 1..=65535.
    #[error("origin `{0}`: port must be a number from 1 to 65535")]
    Port(String),
    /// A host with characters outside letters, digits, `-`, `.` (or a bracketed IPv6 literal).
    #[error("origin `{0}`: host has characters a hostname cannot have")]
    HostSyntax(String),
}

impl Origin {
    /// Builds an origin from parts, validating the host.
    pub fn new(scheme: Scheme, host: &str, port: u16) -> Result<Self, OriginError> {
        let text = format!("{}://{}:{}", scheme.as_str(), host, port);
        if port == 0 {
            return Err(OriginError::Port(text));
        }
        let host = validate_host(host, &text)?;
        Ok(Origin { scheme, host, port })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The lower-cased host (an IPv6 literal keeps its brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The explicit port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn validate_host(host: &str, whole: &str) -> Result<String, OriginError> {
    if host.is_empty() {
        return Err(OriginError::EmptyHost(whole.to_owned()));
    }
    if host.contains('*') {
        return Err(OriginError::Wildcard(whole.to_owned()));
    }
    if host.contains('@') {
        return Err(OriginError::Userinfo(whole.to_owned()));
    }
    if let Some(inner) = host.strip_prefix('[') {
        // An IPv6 literal: parsed, then printed in canonical (RFC 5952) form so that two
        // spellings of one address are one origin. Zone ids are refused.
        let Some(addr) = inner
            .strip_suffix(']')
            .and_then(|i| i.parse::<std::net::Ipv6Addr>().ok())
        else {
            return Err(OriginError::HostSyntax(whole.to_owned()));
        };
        return Ok(format!("[{addr}]"));
    }
    // A host whose last label is numeric is an IPv4 address to every resolver (`127.1`,
    // `2130706433`, `0x7f.0.0.1` all mean 127.0.0.1): accept only the canonical dotted quad.
    let last = host.rsplit('.').next().unwrap_or_default();
    let last = last.as_bytes();
    let numeric = !last.is_empty()
        && (last.iter().all(u8::is_ascii_digit)
            || (last.len() > 2
                && last[..2].eq_ignore_ascii_case(b"0x")
                && last[2..].iter().all(u8::is_ascii_hexdigit)));
    if numeric {
        return match host.parse::<std::net::Ipv4Addr>() {
            Ok(addr) if addr.to_string() == host => Ok(host.to_owned()),
            _ => Err(OriginError::HostSyntax(whole.to_owned())),
        };
    }
    let ok = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    });
    if !ok || host.len() > 253 {
        return Err(OriginError::HostSyntax(whole.to_owned()));
    }
    Ok(host.to_ascii_lowercase())
}

impl FromStr for Origin {
    type Err = OriginError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let whole = s.to_owned();
        let (scheme, rest) = match s.split_once("://") {
            Some((sch, rest)) if sch.eq_ignore_ascii_case("http") => (Scheme::Http, rest),
            Some((sch, rest)) if sch.eq_ignore_ascii_case("https") => (Scheme::Https, rest),
            _ => return Err(OriginError::Scheme(whole)),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '\\']) {
            return Err(OriginError::PathQueryFragment(whole));
        }
        if authority.contains('@') {
            return Err(OriginError::Userinfo(whole));
        }
        let (host, port) = if authority.starts_with('[') {
            match authority.find(']') {
                Some(end) => {
                    let (h, tail) = authority.split_at(end + 1);
                    match tail.strip_prefix(':') {
                        Some(p) => (h, Some(p)),
                        None if tail.is_empty() => (h, None),
                        None => return Err(OriginError::HostSyntax(whole)),
                    }
                }
                None => return Err(OriginError::HostSyntax(whole)),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port = match port {
            None => scheme.default_port(),
            Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
                match p.parse::<u16>() {
                    Ok(n) if n != 0 => n,
                    _ => return Err(OriginError::Port(whole)),
                }
            }
            Some(_) => return Err(OriginError::Port(whole)),
        };
        let host = validate_host(host, &whole)?;
        Ok(Origin { scheme, host, port })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Origin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Origin, OriginError> {
        s.parse()
    }

    #[test]
    fn accepts_and_normalizes() {
        assert_eq!(
            parse("HTTPS://API.OpenAI.com").unwrap().to_string(),
            "https://api.openai.com:443"
        );
        assert_eq!(
            parse("http://127.0.0.1:8080/").unwrap().to_string(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            parse("http://[0:0:0:0:0:0:0:1]").unwrap(),
            parse("http://[::1]:80").unwrap()
        );
        assert_eq!(
            parse("https://[2001:DB8::1]:8443").unwrap().host(),
            "[2001:db8::1]"
        );
        assert_eq!(parse("http://a-b.c0:1").unwrap().port(), 1);
    }

    #[test]
    fn refuses_ambiguous_or_wide_origins() {
        for bad in [
            "ftp://host",
            "host",
            "//host",
            "http://",
            "http://:80",
            "http://user@host",
            "http://user:pw@host",
            "https://*.example.com",
            "http://host/path",
            "http://host/?q",
            "http://host#f",
            "http://host//",
            "http://host\\x",
            "http://host:0",
            "http://host:65536",
            "http://host:",
            "http://host:80:80",
            "http://-a.b",
            "http://a..b",
            "http://a.b.",
            "http://127.1",
            "http://2130706433",
            "http://0x7f.0.0.1",
            "http://127.000.000.001",
            "http://[::1",
            "http://[fe80::1%eth0]",
            "http://[zz::1]",
            "http://[]",
            "http://ex ample.com",
            "http://exämple.com",
            // Found by the `origin` fuzz target: a multi-byte character in a short last label.
            "http://h\u{34b}o\0\0\0\0\0:61472",
            "http://a.\u{34b}",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_validates_like_parse() {
        assert!(Origin::new(Scheme::Https, "api.openai.com", 443).is_ok());
        assert!(Origin::new(Scheme::Https, "api.openai.com", 0).is_err());
        assert!(Origin::new(Scheme::Http, "127.1", 80).is_err());
        assert!(Origin::new(Scheme::Http, "a/b", 80).is_err());
    }
}
