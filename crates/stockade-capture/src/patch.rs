//! Git's patch format: `diff --git` headers with C-style quoting, full index lines, unified
//! text hunks, and `GIT binary patch` literal hunks (zlib + git's base85).

use gix_hash::ObjectId;
use std::io::Write;
use stockade_manifest::FileMode;

/// Context lines around each hunk, as git uses by default.
const CONTEXT: usize = 3;
/// Git looks for a NUL in the first 8000 bytes to call content binary.
const BINARY_SNIFF: usize = 8000;

/// One side of a file section.
pub(crate) struct Side<'a> {
    pub mode: FileMode,
    pub oid: ObjectId,
    pub data: &'a [u8],
}

fn needs_quote(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f
}

/// `prefix` + `path`, quoted the way git quotes it when needed.
pub(crate) fn quoted(prefix: &[u8], path: &[u8]) -> Vec<u8> {
    let mut whole = prefix.to_vec();
    whole.extend_from_slice(path);
    if !whole.iter().any(|b| needs_quote(*b)) {
        return whole;
    }
    let mut out = vec![b'"'];
    for &b in &whole {
        match b {
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0b => out.extend_from_slice(b"\\v"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b if needs_quote(b) => {
                let _ = write!(out, "\\{b:03o}");
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
    out
}

fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_SNIFF)].contains(&0)
}

/// Renders one file section (`old` absent = new file, `new` absent = deleted file).
pub(crate) fn section(
    path: &[u8],
    old: Option<&Side<'_>>,
    new: Option<&Side<'_>>,
    out: &mut Vec<u8>,
) {
    let a = quoted(b"a/", path);
    let b = quoted(b"b/", path);
    out.extend_from_slice(b"diff --git ");
    out.extend_from_slice(&a);
    out.push(b' ');
    out.extend_from_slice(&b);
    out.push(b'\n');
    let null = ObjectId::null(gix_hash::Kind::Sha1);
    match (old, new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", n.mode.as_git_str());
            let _ = writeln!(out, "index {null}..{}", n.oid);
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", o.mode.as_git_str());
            let _ = writeln!(out, "index {}..{null}", o.oid);
        }
        (Some(o), Some(n)) => {
            if o.mode != n.mode {
                let _ = writeln!(out, "old mode {}", o.mode.as_git_str());
                let _ = writeln!(out, "new mode {}", n.mode.as_git_str());
                if o.oid != n.oid {
                    let _ = writeln!(out, "index {}..{}", o.oid, n.oid);
                }
            } else {
                let _ = writeln!(out, "index {}..{} {}", o.oid, n.oid, o.mode.as_git_str());
            }
            if o.oid == n.oid {
                return;
            }
        }
        (None, None) => return,
    }
    let old_data = old.map_or(&[][..], |s| s.data);
    let new_data = new.map_or(&[][..], |s| s.data);
    if old_data.is_empty() && new_data.is_empty() {
        return;
    }
    if is_binary(old_data) || is_binary(new_data) {
        out.extend_from_slice(b"GIT binary patch\n");
        literal(new_data, out);
        literal(old_data, out);
        return;
    }
    out.extend_from_slice(b"--- ");
    if old.is_some() {
        out.extend_from_slice(&a);
    } else {
        out.extend_from_slice(b"/dev/null");
    }
    out.extend_from_slice(b"\n+++ ");
    if new.is_some() {
        out.extend_from_slice(&b);
    } else {
        out.extend_from_slice(b"/dev/null");
    }
    out.push(b'\n');
    hunks(old_data, new_data, out);
}

fn lines(data: &[u8]) -> Vec<&[u8]> {
    data.split_inclusive(|b| *b == b'\n').collect()
}

fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

fn line(prefix: u8, l: &[u8], out: &mut Vec<u8>) {
    out.push(prefix);
    out.extend_from_slice(l);
    if !l.ends_with(b"\n") {
        out.extend_from_slice(b"\n\\ No newline at end of file\n");
    }
}

fn hunks(old: &[u8], new: &[u8], out: &mut Vec<u8>) {
    let ol = lines(old);
    let nl = lines(new);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let ops =
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &ol, &nl, Some(deadline));
    for group in similar::group_diff_ops(ops, CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let os = first.old_range().start;
        let oe = last.old_range().end;
        let ns = first.new_range().start;
        let ne = last.new_range().end;
        let _ = writeln!(out, "@@ -{} +{} @@", range(os, oe - os), range(ns, ne - ns));
        for op in &group {
            for change in op.iter_changes(&ol, &nl) {
                let prefix = match change.tag() {
                    similar::ChangeTag::Equal => b' ',
                    similar::ChangeTag::Delete => b'-',
                    similar::ChangeTag::Insert => b'+',
                };
                line(prefix, change.value(), out);
            }
        }
    }
}

const EN85: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// Git's base85 (RFC 1924 alphabet, big-endian groups of four bytes, zero padded).
pub(crate) fn base85(data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut acc = u32::from_be_bytes(word);
        let mut enc = [0u8; 5];
        for slot in enc.iter_mut().rev() {
            *slot = EN85[(acc % 85) as usize];
            acc /= 85;
        }
        out.extend_from_slice(&enc);
    }
}

fn literal(data: &[u8], out: &mut Vec<u8>) {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = z.write_all(data);
    let deflated = z.finish().unwrap_or_default();
    let _ = writeln!(out, "literal {}", data.len());
    for chunk in deflated.chunks(52) {
        let n = chunk.len() as u8;
        out.push(if n <= 26 { b'A' + n - 1 } else { b'a' + n - 27 });
        base85(chunk, out);
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_git() {
        assert_eq!(quoted(b"a/", b"plain name"), b"a/plain name");
        assert_eq!(quoted(b"a/", b"tab\there"), b"\"a/tab\\there\"");
        assert_eq!(quoted(b"b/", b"q\"\\\n"), b"\"b/q\\\"\\\\\\n\"");
        assert_eq!(quoted(b"a/", b"\xc3\xa9"), b"\"a/\\303\\251\"");
    }

    #[test]
    fn base85_known_vector() {
        // git's encode_85 of "\0\0\0\0" is "00000"; of "\xff\xff\xff\xff" is "|NsC0".
        let mut out = Vec::new();
        base85(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], &mut out);
        assert_eq!(out, b"00000|NsC0");
    }

    #[test]
    fn hunk_ranges() {
        assert_eq!(range(0, 0), "0,0");
        assert_eq!(range(0, 1), "1");
        assert_eq!(range(4, 3), "5,3");
    }
}
