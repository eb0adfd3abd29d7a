//! The canary run inside a sandbox by the probe (filled in by the next increment).
