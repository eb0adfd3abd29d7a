//! What the program inside the sandbox is told: where each origin is served.

use crate::config::Route;
use crate::gateway::Endpoint;

/// Environment variables for the sandboxed program.
///
/// For each route with at least one listener: every [`crate::EnvBinding`] of the route, set to
/// the listener's base URL plus the binding's path (for example
/// `OPENAI_BASE_URL=http://127.0.0.1:41234/v1`), and `STOCKADE_ORIGIN_<RULE>` set to the base
/// URL, where `<RULE>` is the rule id upper-cased with every other character than `A-Z0-9`
/// turned into `_`. Also `STOCKADE_GATEWAY_ORIGINS`, a space-separated list of
/// `ORIGIN=BASE_URL` pairs. When a route has several listeners the first one is named.
/// The values hold no secret; they are safe to show.
pub fn env_for_sandbox(routes: &[Route], endpoints: &[Endpoint]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pairs = Vec::new();
    for route in routes {
        let Some(ep) = endpoints.iter().find(|e| e.rule_id == route.rule_id) else {
            continue;
        };
        let base = ep.base_url();
        for b in &route.env {
            out.push((b.name.clone(), format!("{base}{}", b.path)));
        }
        let var: String = route
            .rule_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        out.push((format!("STOCKADE_ORIGIN_{var}"), base.clone()));
        pairs.push(format!("{}={base}", route.origin));
    }
    if !pairs.is_empty() {
        out.push(("STOCKADE_GATEWAY_ORIGINS".to_owned(), pairs.join(" ")));
    }
    out
}

/// One human-readable line per endpoint, e.g.
/// `stockade: https://api.openai.com:443 is served at http://127.0.0.1:41234 (rule openai)`.
pub fn describe_endpoints(endpoints: &[Endpoint]) -> Vec<String> {
    endpoints
        .iter()
        .map(|e| {
            format!(
                "stockade: {} is served at {} (rule {})",
                e.origin,
                e.base_url(),
                e.rule_id
            )
        })
        .collect()
}
