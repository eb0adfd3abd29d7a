//! Integration tests of `stockade-orchestrator` that need no kernel feature.

mod presets;
