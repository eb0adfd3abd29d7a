//! Resource ceilings.

use serde::{Deserialize, Serialize};

/// Resource ceilings for one worker. Every field is a hard limit the backend must enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// CPU quota in milli-CPUs (1000 = one full core).
    pub cpu_millis: u32,
    /// Memory ceiling in bytes (swap included where the host has swap).
    pub memory_bytes: u64,
    /// Writable-disk ceiling in bytes across every writable place of the sandbox.
    pub disk_bytes: u64,
    /// Maximum number of processes and threads alive at once.
    pub pids: u32,
}
