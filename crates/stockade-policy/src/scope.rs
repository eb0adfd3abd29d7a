//! Candidate path scope and forbidden-path patterns (normalized, repository-relative).
