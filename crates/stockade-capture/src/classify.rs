//! From raw differences to accepted and rejected changes, a patch that applies, and blobs.

use crate::base::{Base, BaseBlob};
use crate::error::CaptureError;
use crate::patch::{Side, section};
use crate::walk::{Collected, NewItem};
use std::collections::BTreeSet;
use stockade_manifest::{
    AcceptedChange, BoundHit, BoundName, BoundsSpec, ChangeKind, FileMode, NewEntry, OldEntry,
    RejectReason, RejectedChange, RepoPath,
};
use stockade_policy::{PathScope, ScopeDecision};

pub(crate) struct Decided {
    pub accepted: Vec<AcceptedChange>,
    pub rejected: Vec<RejectedChange>,
    pub bounds_hit: Vec<BoundHit>,
    pub patch: Vec<u8>,
    pub blobs: Vec<Vec<u8>>,
}

struct Candidate {
    path: Vec<u8>,
    kind: ChangeKind,
    old: Option<BaseBlob>,
    new: Option<(FileMode, Vec<u8>, gix_hash::ObjectId)>,
}

/// Git's NTFS protection (on by default) refuses `.git` followed by dots or spaces, and
/// `git~1`, case-insensitively.
fn is_dotgit_like(c: &[u8]) -> bool {
    let lower = c.to_ascii_lowercase();
    if lower == b"git~1" {
        return true;
    }
    lower.starts_with(b".git") && lower[4..].iter().all(|b| *b == b'.' || *b == b' ')
}

fn protected_symlink_name(c: &[u8]) -> bool {
    let lower = c.to_ascii_lowercase();
    let trimmed: &[u8] = {
        let mut end = lower.len();
        while end > 0 && (lower[end - 1] == b'.' || lower[end - 1] == b' ') {
            end -= 1;
        }
        &lower[..end]
    };
    matches!(
        trimmed,
        b".gitmodules" | b".gitattributes" | b".gitignore" | b".mailmap"
    ) || trimmed.starts_with(b"gitmod~")
        || trimmed.starts_with(b"gitatt~")
        || trimmed.starts_with(b"gitign~")
        || trimmed.starts_with(b"mailma~")
}

/// The path-level reason to refuse a change, if any; `.git` checks come first, then scope.
pub(crate) fn path_reason(
    path: &[u8],
    scope: &PathScope,
    new_is_symlink: bool,
) -> Option<RejectReason> {
    let comps: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    if comps.iter().any(|c| c.eq_ignore_ascii_case(b".git")) {
        return Some(RejectReason::GitDir);
    }
    if comps.iter().any(|c| is_dotgit_like(c)) {
        return Some(RejectReason::GitRefusesPath);
    }
    if new_is_symlink && comps.last().is_some_and(|c| protected_symlink_name(c)) {
        return Some(RejectReason::GitRefusesPath);
    }
    match scope.decide(path) {
        ScopeDecision::Allowed => None,
        ScopeDecision::OutOfScope => Some(RejectReason::OutOfScope),
        ScopeDecision::Forbidden { pattern } => Some(RejectReason::Forbidden { pattern }),
        #[allow(unreachable_patterns)]
        _ => Some(RejectReason::OutOfScope),
    }
}

fn hex_of(oid: &gix_hash::ObjectId) -> String {
    oid.to_string()
}

/// Whether an addition at `path` would collide with base content left in place by a rejection.
fn blocked_by(path: &[u8], remaining: &BTreeSet<Vec<u8>>) -> Option<Vec<u8>> {
    for (i, b) in path.iter().enumerate() {
        if *b == b'/' && remaining.contains(&path[..i]) {
            return Some(path[..i].to_vec());
        }
    }
    let mut lo = path.to_vec();
    lo.push(b'/');
    let mut hi = path.to_vec();
    hi.push(b'/' + 1);
    remaining.range(lo..hi).next().cloned()
}

pub(crate) fn decide(
    base: &Base,
    collected: Collected,
    scope: &PathScope,
    bounds: BoundsSpec,
) -> Result<Decided, CaptureError> {
    let Collected { mut old, new, .. } = collected;
    let mut rejected = Vec::new();
    let mut candidates = Vec::new();
    let reject = |rejected: &mut Vec<RejectedChange>, path: &[u8], kind, reason| {
        rejected.push(RejectedChange {
            path: RepoPath::new(path.to_vec()),
            kind: Some(kind),
            reason,
        });
    };
    // Base content that stays in place because its change was rejected.
    let mut remaining: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (path, item) in new {
        let o = old.remove(&path);
        let kind = match (&o, &item) {
            (None, _) => ChangeKind::Added,
            (Some(_), NewItem::Refused(_)) => ChangeKind::Modified,
            (Some(ob), NewItem::Blob { mode, oid, .. }) => {
                if (ob.mode == FileMode::Symlink) != (*mode == FileMode::Symlink) {
                    ChangeKind::TypeChanged
                } else if ob.oid == *oid {
                    ChangeKind::ModeChanged
                } else {
                    ChangeKind::Modified
                }
            }
        };
        let is_link = matches!(
            item,
            NewItem::Blob {
                mode: FileMode::Symlink,
                ..
            }
        );
        let reason = path_reason(&path, scope, is_link).or(match &item {
            NewItem::Refused(r) => Some(r.clone()),
            NewItem::Blob { .. } => None,
        });
        if let Some(r) = reason {
            if o.is_some() {
                remaining.insert(path.clone());
            }
            reject(&mut rejected, &path, kind, r);
            continue;
        }
        let NewItem::Blob { mode, data, oid } = item else {
            continue;
        };
        candidates.push(Candidate {
            path,
            kind,
            old: o,
            new: Some((mode, data, oid)),
        });
    }
    for (path, o) in old {
        if let Some(r) = path_reason(&path, scope, false) {
            remaining.insert(path.clone());
            reject(&mut rejected, &path, ChangeKind::Deleted, r);
            continue;
        }
        candidates.push(Candidate {
            path,
            kind: ChangeKind::Deleted,
            old: Some(o),
            new: None,
        });
    }
    candidates.sort_by(|a, b| a.path.cmp(&b.path));

    // Deletions first (their rejection can block additions), then everything else.
    let mut budget = bounds.max_patch_bytes;
    let mut patch_cut = 0u64;
    let mut sections: Vec<(Vec<u8>, Vec<u8>, Candidate)> = Vec::new();
    for phase in [true, false] {
        for c in candidates
            .iter()
            .filter(|c| (c.kind == ChangeKind::Deleted) == phase)
        {
            if c.old.is_none()
                && let Some(p) = blocked_by(&c.path, &remaining)
            {
                reject(
                    &mut rejected,
                    &c.path,
                    c.kind,
                    RejectReason::BlockedBy {
                        path: RepoPath::new(p),
                    },
                );
                continue;
            }
            let old_data = match &c.old {
                Some(o) => base.blob(&o.oid)?,
                None => Vec::new(),
            };
            let mut text = Vec::new();
            let old_side = c.old.map(|o| Side {
                mode: o.mode,
                oid: o.oid,
                data: &old_data,
            });
            let new_side = c.new.as_ref().map(|(mode, data, oid)| Side {
                mode: *mode,
                oid: *oid,
                data,
            });
            if c.kind == ChangeKind::TypeChanged {
                section(&c.path, old_side.as_ref(), None, &mut text);
                section(&c.path, None, new_side.as_ref(), &mut text);
            } else {
                section(&c.path, old_side.as_ref(), new_side.as_ref(), &mut text);
            }
            if text.len() as u64 > budget {
                patch_cut += 1;
                if c.old.is_some() {
                    remaining.insert(c.path.clone());
                }
                reject(
                    &mut rejected,
                    &c.path,
                    c.kind,
                    RejectReason::PatchBoundExceeded {
                        limit: bounds.max_patch_bytes,
                    },
                );
                continue;
            }
            budget -= text.len() as u64;
            sections.push((
                c.path.clone(),
                text,
                Candidate {
                    path: c.path.clone(),
                    kind: c.kind,
                    old: c.old,
                    new: c.new.clone(),
                },
            ));
        }
    }
    sections.sort_by(|a, b| a.0.cmp(&b.0));

    let mut patch = Vec::new();
    let mut accepted = Vec::new();
    let mut blobs = Vec::new();
    for (_, text, c) in sections {
        patch.extend_from_slice(&text);
        let new = c.new.map(|(mode, data, oid)| {
            let entry = NewEntry {
                mode,
                git_blob: hex_of(&oid),
                size: data.len() as u64,
                blake3: blake3::hash(&data).to_hex().to_string(),
                sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data)),
            };
            blobs.push(data);
            entry
        });
        accepted.push(AcceptedChange {
            path: RepoPath::new(c.path),
            kind: c.kind,
            old: c.old.map(|o| OldEntry {
                mode: o.mode,
                git_blob: hex_of(&o.oid),
            }),
            new,
        });
    }

    let mut bounds_hit = Vec::new();
    let too_large = rejected
        .iter()
        .filter(|r| matches!(r.reason, RejectReason::FileTooLarge { .. }))
        .count() as u64;
    if too_large > 0 {
        bounds_hit.push(BoundHit {
            bound: BoundName::FileBytes,
            limit: bounds.max_file_bytes,
            affected: too_large,
        });
    }
    if patch_cut > 0 {
        bounds_hit.push(BoundHit {
            bound: BoundName::PatchBytes,
            limit: bounds.max_patch_bytes,
            affected: patch_cut,
        });
    }
    Ok(Decided {
        accepted,
        rejected,
        bounds_hit,
        patch,
        blobs,
    })
}
