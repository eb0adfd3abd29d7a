//! `stockade probe`.

use stockade_capabilities::{Protection, ProtectionStatus};
use stockade_sandbox_linux::shared::{self, Scope, Source};

/// Runs the probe and prints the table (or JSON). Exit 0 only when all eight ADR-0017 bits hold.
pub fn run(json: bool) -> i32 {
    // Always live; the fresh outcome replaces the one later `stockade exec` calls reuse.
    let attested = shared::probe_shared(Scope::Full, std::time::Duration::ZERO);
    if let Some(w) = &attested.warning {
        eprintln!("stockade: warning: attestation not shared: {w}");
    }
    let shared_at = match &attested.source {
        Source::Live { shared_at } => shared_at.clone(),
        Source::Shared { .. } => None,
    };
    let outcome = attested.outcome;
    let caps = &outcome.capabilities;
    let all = Protection::ADR_0017.iter().all(|p| caps.is_enforced(*p));
    if json {
        let v = serde_json::json!({
            "all_adr_0017_enforced": all,
            "capabilities": caps,
            "checks": outcome.checks,
            "shared_at": shared_at,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        );
    } else {
        println!("{}", caps.report().lines().next().unwrap_or(""));
        println!();
        println!("{:<26} {:<11} EVIDENCE / REMEDY", "PROTECTION", "STATUS");
        for (p, s) in caps.iter() {
            let mark = if p.is_adr_0017() { "*" } else { " " };
            let (st, text) = match s {
                ProtectionStatus::Enforced { evidence } if s.is_enforced() => {
                    ("enforced", evidence.clone())
                }
                ProtectionStatus::Unavailable { reason, remedy } => {
                    ("UNAVAILABLE", format!("{reason}\n{:<39}fix: {remedy}", ""))
                }
                _ => ("UNKNOWN", "not attested".to_owned()),
            };
            println!("{mark}{:<25} {:<11} {}", p.as_str(), st, text);
        }
        println!();
        println!(
            "* = ADR-0017 enforcement bit; all eight {}",
            if all {
                "are enforced"
            } else {
                "are NOT enforced: agent runs will be refused"
            }
        );
        match &shared_at {
            Some(p) => println!(
                "attestation shared with `stockade exec` calls of this boot for {} min: {}",
                shared::DEFAULT_MAX_AGE.as_secs() / 60,
                p.display()
            ),
            None => {
                println!("attestation not shared (a self-test failed or there is no private store)")
            }
        }
    }
    if all { 0 } else { 1 }
}
