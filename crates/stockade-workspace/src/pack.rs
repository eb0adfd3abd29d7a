//! A minimal pack (v2) and pack index (v2) writer for the workspace's own object database.
//!
//! Every object is stored whole (no deltas), deflated at the fastest level, so each worker
//! thread can pack the blobs it is already holding for the checkout without a second read.
//! The resulting `pack-<sha1>.pack` / `.idx` pair is what `git index-pack` would write for
//! the same entries; `git fsck` and `git verify-pack` accept it (tested in `tests/it`).

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use gix_hash::ObjectId;
use gix_zlib::stream::deflate::{Compress, FlushCompress};

use crate::{WorkspaceError, io_err};

/// Writes one pack file, streaming, and its index when finished.
pub(crate) struct PackWriter {
    dir: PathBuf,
    tmp_path: PathBuf,
    out: BufWriter<File>,
    hasher: gix_hash::Hasher,
    offset: u64,
    expected: u32,
    entries: Vec<(ObjectId, u32, u64)>,
    deflate: Compress,
    scratch: Vec<u8>,
}

fn hash_err(message: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::ObjectDatabase {
        id: String::new(),
        message: message.to_string(),
    }
}

impl PackWriter {
    /// Start a pack in `dir` (the `objects/pack` directory) that will hold exactly `count`
    /// objects; `name` distinguishes temporary files of concurrent writers.
    pub(crate) fn create(dir: &Path, name: &str, count: u32) -> Result<Self, WorkspaceError> {
        let tmp_path = dir.join(format!("tmp_pack_{name}"));
        let file = File::create_new(&tmp_path).map_err(io_err("create pack", &tmp_path))?;
        let mut writer = Self {
            dir: dir.to_path_buf(),
            tmp_path,
            out: BufWriter::with_capacity(256 * 1024, file),
            hasher: gix_hash::hasher(gix_hash::Kind::Sha1),
            offset: 0,
            expected: count,
            entries: Vec::with_capacity(count as usize),
            deflate: Compress::new(gix_zlib::Compression::BEST_SPEED),
            scratch: Vec::new(),
        };
        let mut header = [0u8; 12];
        header[..4].copy_from_slice(b"PACK");
        header[4..8].copy_from_slice(&2u32.to_be_bytes());
        header[8..].copy_from_slice(&count.to_be_bytes());
        writer.emit(&header)?;
        Ok(writer)
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<(), WorkspaceError> {
        self.hasher.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(io_err("write pack", &self.tmp_path))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Append one whole object of `kind` whose id is `id`.
    pub(crate) fn add(
        &mut self,
        id: ObjectId,
        kind: gix_object::Kind,
        data: &[u8],
    ) -> Result<(), WorkspaceError> {
        let type_bits: u8 = match kind {
            gix_object::Kind::Commit => 1,
            gix_object::Kind::Tree => 2,
            gix_object::Kind::Blob => 3,
            gix_object::Kind::Tag => 4,
        };
        let mut entry = std::mem::take(&mut self.scratch);
        entry.clear();
        // Entry header: type and size, size in little-endian 7-bit groups.
        let mut size = data.len() as u64;
        let mut first = (type_bits << 4) | (size & 0x0f) as u8;
        size >>= 4;
        if size != 0 {
            first |= 0x80;
        }
        entry.push(first);
        while size != 0 {
            let mut byte = (size & 0x7f) as u8;
            size >>= 7;
            if size != 0 {
                byte |= 0x80;
            }
            entry.push(byte);
        }
        self.deflate_into(data, &mut entry)?;
        let crc = crc32fast::hash(&entry);
        let offset = self.offset;
        let result = self.emit(&entry);
        self.scratch = entry;
        result?;
        self.entries.push((id, crc, offset));
        Ok(())
    }

    fn deflate_into(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), WorkspaceError> {
        self.deflate.reset();
        let mut consumed = 0usize;
        let mut len = out.len();
        loop {
            let room = (input.len() - consumed) + (input.len() - consumed) / 64 + 128;
            out.resize(len + room, 0);
            let (in_before, out_before) = (self.deflate.total_in(), self.deflate.total_out());
            let status = self
                .deflate
                .compress(&input[consumed..], &mut out[len..], FlushCompress::Finish)
                .map_err(|e| hash_err(format!("deflate failed: {e}")))?;
            consumed += (self.deflate.total_in() - in_before) as usize;
            len += (self.deflate.total_out() - out_before) as usize;
            if status == gix_zlib::Status::StreamEnd {
                break;
            }
        }
        out.truncate(len);
        Ok(())
    }

    /// Write the trailer and the index, and move both to their final `pack-<sha1>` names.
    pub(crate) fn finish(mut self) -> Result<(), WorkspaceError> {
        if self.entries.len() != self.expected as usize {
            return Err(hash_err(format!(
                "pack writer expected {} objects, got {}",
                self.expected,
                self.entries.len()
            )));
        }
        let hasher = std::mem::replace(&mut self.hasher, gix_hash::hasher(gix_hash::Kind::Sha1));
        let pack_id = hasher.try_finalize().map_err(hash_err)?;
        self.out
            .write_all(pack_id.as_slice())
            .map_err(io_err("write pack", &self.tmp_path))?;
        let file = self.out.into_inner().map_err(|e| WorkspaceError::Io {
            op: "flush pack",
            path: self.tmp_path.clone(),
            source: e.into_error(),
        })?;
        drop(file);

        let hex = pack_id.to_hex().to_string();
        let idx_path = self.dir.join(format!("pack-{hex}.idx"));
        write_index(&idx_path, &mut self.entries, pack_id)?;
        let pack_path = self.dir.join(format!("pack-{hex}.pack"));
        std::fs::rename(&self.tmp_path, &pack_path).map_err(io_err("rename pack", &pack_path))?;
        Ok(())
    }
}

/// Write a version 2 pack index for `entries` (id, crc32, offset).
fn write_index(
    path: &Path,
    entries: &mut [(ObjectId, u32, u64)],
    pack_id: ObjectId,
) -> Result<(), WorkspaceError> {
    entries.sort_unstable_by_key(|e| e.0);
    if entries.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(hash_err("duplicate object in pack"));
    }
    let mut buf: Vec<u8> = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    buf.extend_from_slice(&[0xff, b't', b'O', b'c']);
    buf.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _, _) in entries.iter() {
        fanout[id.as_slice()[0] as usize] += 1;
    }
    let mut running = 0u32;
    for count in fanout {
        running += count;
        buf.extend_from_slice(&running.to_be_bytes());
    }
    for (id, _, _) in entries.iter() {
        buf.extend_from_slice(id.as_slice());
    }
    for (_, crc, _) in entries.iter() {
        buf.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large: Vec<u64> = Vec::new();
    for (_, _, offset) in entries.iter() {
        if *offset < 0x8000_0000 {
            buf.extend_from_slice(&(*offset as u32).to_be_bytes());
        } else {
            let index = 0x8000_0000u32 | large.len() as u32;
            buf.extend_from_slice(&index.to_be_bytes());
            large.push(*offset);
        }
    }
    for offset in large {
        buf.extend_from_slice(&offset.to_be_bytes());
    }
    buf.extend_from_slice(pack_id.as_slice());
    let mut hasher = gix_hash::hasher(gix_hash::Kind::Sha1);
    hasher.update(&buf);
    let idx_id = hasher.try_finalize().map_err(hash_err)?;
    buf.extend_from_slice(idx_id.as_slice());
    std::fs::write(path, &buf).map_err(io_err("write pack index", path))
}
