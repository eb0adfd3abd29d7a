//! Planning a gateway for one sandbox from command-line style flags, before anything starts.
//!
//! `stockade exec --allow-origin ORIGIN --origin-header ORIGIN NAME=env:VAR|file:PATH` turns
//! into a [`SandboxPlan`]: the routes, the loopback ports the backend must listen on inside
//! the sandbox, the environment for the program, and the lines to print on stderr. Secrets are
//! resolved once here (and dropped) so a missing one refuses before the program starts; the
//! gateway resolves them again when it starts.

use std::net::SocketAddr;

use http::HeaderName;
use stockade_policy::Origin;

use crate::config::{Route, SecretSource};
use crate::env::{describe_endpoints, env_for_sandbox};
use crate::error::GatewayError;
use crate::gateway::Endpoint;

/// The first in-sandbox port [`plan_for_sandbox`] uses by default (the orchestrator's too).
pub const DEFAULT_FIRST_PORT: u16 = 41000;

/// Everything a launcher needs to wire a gateway into one sandbox.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SandboxPlan {
    /// The routes, in flag order, with rule ids `origin-1`, `origin-2`, ...
    pub routes: Vec<Route>,
    /// `(port, rule id)`: open a listener on `127.0.0.1:port` inside the sandbox for each, in
    /// this order, and hand them to the gateway with the rule id.
    pub ports: Vec<(u16, String)>,
    /// Variables for the program (base URLs only; never a secret).
    pub env: Vec<(String, String)>,
    /// One human-readable line per origin, for stderr.
    pub lines: Vec<String>,
}

impl SandboxPlan {
    /// Pairs the backend's listeners (in [`SandboxPlan::ports`] order) with their rule ids, for
    /// [`crate::Gateway::start`] or [`crate::BlockingGateway::start`].
    pub fn tag_listeners(
        &self,
        listeners: Vec<std::net::TcpListener>,
    ) -> Result<Vec<(std::net::TcpListener, String)>, GatewayError> {
        if listeners.len() != self.ports.len() {
            return Err(GatewayError::Config(format!(
                "expected {} gateway listeners, the backend opened {}",
                self.ports.len(),
                listeners.len()
            )));
        }
        Ok(listeners
            .into_iter()
            .zip(self.ports.iter())
            .map(|(l, (_, rule))| (l, rule.clone()))
            .collect())
    }
}

/// Parses `NAME=env:VAR` or `NAME=file:PATH` (the value of `--origin-header`'s second part).
pub fn parse_header_flag(s: &str) -> Result<(HeaderName, SecretSource), GatewayError> {
    let (name, source) = s.split_once('=').ok_or_else(|| {
        GatewayError::Config(format!("`{s}` is not NAME=env:VAR or NAME=file:PATH"))
    })?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| GatewayError::Config(format!("`{name}` is not a header name")))?;
    Ok((name, source.parse()?))
}

/// Builds routes from `--allow-origin` values and `(origin, NAME=SOURCE)` header flags, picks
/// ports from `first_port` up, checks every route and resolves every secret once.
///
/// A header for an origin that is not allowed is an error (name it with `--allow-origin`
/// too); an origin allowed twice is an error.
pub fn plan_for_sandbox(
    allow: &[String],
    headers: &[(String, String)],
    first_port: u16,
) -> Result<SandboxPlan, GatewayError> {
    let mut routes: Vec<Route> = Vec::new();
    for (i, text) in allow.iter().enumerate() {
        let origin: Origin = text
            .parse()
            .map_err(|e| GatewayError::Config(format!("--allow-origin: {e}")))?;
        if routes.iter().any(|r| r.origin == origin) {
            return Err(GatewayError::Config(format!(
                "origin {origin} is allowed twice"
            )));
        }
        routes.push(Route::new(format!("origin-{}", i + 1), origin));
    }
    for (origin_text, header) in headers {
        let origin: Origin = origin_text
            .parse()
            .map_err(|e| GatewayError::Config(format!("--origin-header: {e}")))?;
        let (name, source) = parse_header_flag(header)?;
        let Some(route) = routes.iter_mut().find(|r| r.origin == origin) else {
            return Err(GatewayError::Config(format!(
                "--origin-header for {origin}, which is not allowed: add --allow-origin {origin}"
            )));
        };
        if route.inject_headers.iter().any(|(n, _)| *n == name) {
            return Err(GatewayError::Config(format!(
                "header `{name}` is set twice for {origin}"
            )));
        }
        route.inject_headers.push((name, source));
    }
    let mut ports = Vec::new();
    let mut endpoints = Vec::new();
    for (i, route) in routes.iter().enumerate() {
        route.validate()?;
        for (_, source) in &route.inject_headers {
            source.resolve()?;
        }
        let port = u16::try_from(i)
            .ok()
            .and_then(|i| first_port.checked_add(i))
            .ok_or_else(|| GatewayError::Config("too many origins for the port range".into()))?;
        ports.push((port, route.rule_id.clone()));
        endpoints.push(Endpoint {
            rule_id: route.rule_id.clone(),
            origin: route.origin.clone(),
            local_addr: SocketAddr::from(([127, 0, 0, 1], port)),
        });
    }
    let env = env_for_sandbox(&routes, &endpoints);
    let lines = describe_endpoints(&endpoints);
    Ok(SandboxPlan {
        routes,
        ports,
        env,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_routes_ports_and_env() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, b"Bearer sk-plan\n").unwrap();
        let header = format!("authorization=file:{}", f.path().display());
        let plan = plan_for_sandbox(
            &[
                "https://api.openai.com".into(),
                "http://127.0.0.1:8080".into(),
            ],
            &[("https://api.openai.com:443".into(), header)],
            41000,
        )
        .unwrap();
        assert_eq!(
            plan.ports,
            vec![
                (41000, "origin-1".to_owned()),
                (41001, "origin-2".to_owned())
            ]
        );
        assert_eq!(plan.routes[0].inject_headers.len(), 1);
        assert!(plan.env.contains(&(
            "STOCKADE_ORIGIN_ORIGIN_1".into(),
            "http://127.0.0.1:41000".into()
        )));
        assert_eq!(
            plan.lines[1],
            "stockade: http://127.0.0.1:8080 is served at http://127.0.0.1:41001 (rule origin-2)"
        );
        assert!(!format!("{plan:?}").contains("sk-plan"));
    }

    #[test]
    fn bad_flags_are_refused_with_the_reason() {
        let err = |allow: &[&str], headers: &[(&str, &str)]| {
            let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            plan_for_sandbox(&allow, &headers, 41000)
                .unwrap_err()
                .to_string()
        };
        assert!(err(&["https://*.example.com"], &[]).contains("wildcard"));
        assert!(
            err(&["https://a.example", "https://A.example:443"], &[]).contains("allowed twice")
        );
        assert!(
            err(
                &["https://a.example"],
                &[("https://b.example", "x-api-key=env:PATH")]
            )
            .contains("not allowed")
        );
        assert!(
            err(
                &["https://a.example"],
                &[("https://a.example", "x-api-key=literal")]
            )
            .contains("env:NAME")
        );
        assert!(
            err(
                &["https://a.example"],
                &[("https://a.example", "host=env:PATH")]
            )
            .contains("cannot be injected")
        );
        assert!(
            err(
                &["https://a.example"],
                &[(
                    "https://a.example",
                    "x-api-key=env:STOCKADE_SURELY_UNSET_FOR_PLAN"
                )]
            )
            .contains("unset")
        );
    }
}
