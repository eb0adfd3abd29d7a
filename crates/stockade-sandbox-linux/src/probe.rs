//! Probed attestation (filled in by the next increment).

/// Placeholder until the canary-based probe lands.
pub fn probe() {}
