//! Turning a resolved policy into the agent's launch and the gateway's routes (pure).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::str::FromStr;

use stockade_gateway::{Route, SecretSource};
use stockade_policy::{PROMPT_PLACEHOLDER, PromptTransport, SandboxPolicy};

use crate::AttemptError;

/// The first loopback port the gateway listens on inside the sandbox's network namespace;
/// destination `i` is served on `GATEWAY_FIRST_PORT + i`. The namespace is the sandbox's own,
/// so these ports collide with nothing on the host.
pub const GATEWAY_FIRST_PORT: u16 = 41_000;

/// Environment variable naming every served origin, `ORIGIN=BASE_URL` pairs separated by spaces.
pub const GATEWAY_ORIGINS_ENV: &str = "STOCKADE_GATEWAY_ORIGINS";

/// How the agent is started and what the gateway serves.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    /// Program and arguments, the prompt substituted for `argument` transport.
    pub argv: Vec<String>,
    /// The complete environment: the preset's fixed variables and the gateway base URLs.
    pub env: Vec<(String, String)>,
    /// Bytes written to the agent's standard input, then closed (`stdin` transport).
    pub stdin: Option<Vec<u8>>,
    /// The prompt file's bytes (`file` transport). It is delivered only through the backend's
    /// isolated input mount, never into the workspace; `argv` still holds the
    /// `{prompt_file}` placeholder until the session says where that mount is.
    pub prompt_file: Option<Vec<u8>>,
    /// Loopback ports to open in the sandbox, each with the gateway rule it serves.
    pub ports: Vec<(u16, String)>,
    /// The gateway's routes, one per destination.
    pub routes: Vec<Route>,
}

/// Builds the launch for `policy`.
///
/// For `file` prompt transport the prompt travels only through the backend's isolated input
/// mount (read-only, outside the candidate workspace); a prompt file is never written into the
/// workspace (ADR-0017). Admission already refused a backend that does not attest that mount.
pub fn plan_launch(policy: &SandboxPolicy) -> Result<LaunchPlan, AttemptError> {
    let objective = policy.objective();
    let mut prompt_file = None;
    let (argv, stdin) = match policy.prompt_transport() {
        PromptTransport::Stdin => (
            policy.command().to_vec(),
            Some(objective.as_bytes().to_vec()),
        ),
        PromptTransport::Argument => {
            let argv: Vec<String> = policy
                .command()
                .iter()
                .map(|a| a.replace(PROMPT_PLACEHOLDER, objective))
                .collect();
            (argv, None)
        }
        PromptTransport::File => {
            prompt_file = Some(objective.as_bytes().to_vec());
            (policy.command().to_vec(), None)
        }
    };
    let mut env: Vec<(String, String)> = policy.env().to_vec();
    let mut names: BTreeSet<String> = env.iter().map(|(n, _)| n.clone()).collect();
    let mut ports = Vec::new();
    let mut routes = Vec::new();
    let mut pairs = Vec::new();
    for (i, dest) in policy.destinations().iter().enumerate() {
        let port = u16::try_from(i)
            .ok()
            .and_then(|i| GATEWAY_FIRST_PORT.checked_add(i))
            .ok_or_else(|| AttemptError::Plan("too many destinations".to_owned()))?;
        let base = format!("http://127.0.0.1:{port}");
        let rule = dest.connection.clone();
        let mut route = Route::new(rule.clone(), dest.origin.clone());
        for h in &dest.headers {
            let name = http::HeaderName::from_str(&h.header).map_err(|_| {
                AttemptError::Plan(format!(
                    "connection `{rule}`: header `{}` is not a valid name",
                    h.header
                ))
            })?;
            let source = match h.secret.source() {
                stockade_policy::SecretSource::Env(var) => SecretSource::Env(var.to_owned()),
                stockade_policy::SecretSource::File(path) => {
                    SecretSource::File(PathBuf::from(path))
                }
            };
            route = route.inject(name, source);
        }
        for var in &dest.base_url_env {
            if !names.insert(var.clone()) {
                return Err(AttemptError::Plan(format!(
                    "environment variable `{var}` would be set twice (preset env or another connection)"
                )));
            }
            env.push((var.clone(), base.clone()));
        }
        pairs.push(format!("{}={base}", dest.origin));
        ports.push((port, rule));
        routes.push(route);
    }
    if !pairs.is_empty() {
        if !names.insert(GATEWAY_ORIGINS_ENV.to_owned()) {
            return Err(AttemptError::Plan(format!(
                "the preset may not set `{GATEWAY_ORIGINS_ENV}`"
            )));
        }
        env.push((GATEWAY_ORIGINS_ENV.to_owned(), pairs.join(" ")));
    }
    env.sort();
    Ok(LaunchPlan {
        argv,
        env,
        stdin,
        prompt_file,
        ports,
        routes,
    })
}

/// Resolves every injected header's value on the host once, before anything starts, so a
/// missing credential refuses the attempt instead of failing the agent's first request.
/// Errors name the source (`env:NAME`, `file:PATH`), never a value.
pub fn check_secrets(plan: &LaunchPlan) -> Result<(), AttemptError> {
    for route in &plan.routes {
        for (_, source) in &route.inject_headers {
            source
                .resolve()
                .map_err(|e| AttemptError::Secret(e.to_string()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::{load_preset, load_trusted_connections, load_work_unit};

    fn policy(transport: &str, command: &str, network: &str) -> SandboxPolicy {
        let preset = format!(
            r#"
id = "p"
kind = "model-only"
command = {command}
prompt_transport = "{transport}"
sandbox_required = true
[default_limits]
cpu_millis = 1000
memory_bytes = 1000000
disk_bytes = 1000000
pids = 10
[env]
FOO = "bar"
[[connections]]
name = "openai"
base_url_env = ["OPENAI_BASE_URL"]
"#
        );
        let wu = format!(
            r#"
id = "w"
objective = "fix it; rm -rf / $(whoami)"
base_commit = "173c806a135aa5b8e34da064d6f71003ef1a75ba"
scope = ["src"]
[permissions]
sandbox_required = true
process_execution = true
wall_time_secs = 5
network = {network}
"#
        );
        let trusted = r#"
[connections.openai]
origin = "http://127.0.0.1:9"
headers = [{ header = "authorization", secret = "env:STOCKADE_TEST_NO_SUCH_VAR" }]
"#;
        SandboxPolicy::resolve(
            &load_work_unit(wu.as_bytes(), "w.toml").unwrap(),
            &load_preset(preset.as_bytes(), "p.toml").unwrap(),
            &load_trusted_connections(trusted.as_bytes(), "t.toml").unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn argument_transport_substitutes_the_prompt_as_one_argument() {
        let p = policy(
            "argument",
            r#"["agent", "--task", "{prompt}"]"#,
            r#"{ mode = "none" }"#,
        );
        let plan = plan_launch(&p).unwrap();
        assert_eq!(plan.argv, ["agent", "--task", "fix it; rm -rf / $(whoami)"]);
        assert!(plan.stdin.is_none());
        assert!(plan.ports.is_empty() && plan.routes.is_empty());
        assert_eq!(plan.env, [("FOO".to_owned(), "bar".to_owned())]);
    }

    #[test]
    fn stdin_transport_and_gateway_env() {
        let p = policy(
            "stdin",
            r#"["agent"]"#,
            r#"{ mode = "bounded", destinations = ["http://127.0.0.1:9"] }"#,
        );
        let plan = plan_launch(&p).unwrap();
        assert_eq!(
            plan.stdin.as_deref(),
            Some("fix it; rm -rf / $(whoami)".as_bytes())
        );
        assert_eq!(plan.ports, [(GATEWAY_FIRST_PORT, "openai".to_owned())]);
        let env: std::collections::BTreeMap<_, _> = plan.env.iter().cloned().collect();
        assert_eq!(
            env["OPENAI_BASE_URL"],
            format!("http://127.0.0.1:{GATEWAY_FIRST_PORT}")
        );
        assert_eq!(
            env[GATEWAY_ORIGINS_ENV],
            format!("http://127.0.0.1:9=http://127.0.0.1:{GATEWAY_FIRST_PORT}")
        );
        // No secret value, and the missing host variable refuses before anything starts,
        // naming the source only.
        let err = check_secrets(&plan).unwrap_err().to_string();
        assert!(err.contains("STOCKADE_TEST_NO_SUCH_VAR"), "{err}");
    }

    #[test]
    fn file_transport_keeps_the_prompt_out_of_argv_and_stdin() {
        let p = policy(
            "file",
            r#"["agent", "{prompt_file}"]"#,
            r#"{ mode = "none" }"#,
        );
        let plan = plan_launch(&p).unwrap();
        // The prompt travels only as the input file; the placeholder waits for the session to
        // say where its isolated input mount is.
        assert_eq!(plan.argv, ["agent", "{prompt_file}"]);
        assert_eq!(plan.stdin, None);
        assert_eq!(plan.prompt_file.as_deref(), Some(p.objective().as_bytes()));
    }
}
