//! Sparse file contents for the memory backend.
//!
//! A file is a map from chunk index to the bytes stored in that chunk. A
//! chunk covers `CHUNK_BYTES` of the file; its vector holds only the prefix
//! that was ever written, so a hole (never written, or cut off by a
//! truncate) costs nothing and reads back as zeros. Setting the size of a
//! file to a terabyte allocates nothing.
//!
//! The caller (the inode) owns the file size; this module only knows what
//! is stored. Invariant: no byte is stored at or beyond the file size, so
//! growing a file after shrinking it never resurrects old data.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

/// Bytes covered by one chunk. Big enough that a 1 MiB WRITE touches only 16
/// map entries, small enough that a sparse write costs little.
const CHUNK_BYTES: u64 = 64 * 1024;

/// The stored bytes of one regular file.
#[derive(Default, Debug)]
pub(super) struct SparseData {
    /// Chunk index → stored prefix of that chunk (never longer than `CHUNK_BYTES`).
    chunks: BTreeMap<u64, Vec<u8>>,
    /// Sum of the chunk lengths: what this file charges against the capacity.
    stored_bytes: u64,
}

/// The chunk pieces a byte range `[offset, offset + len)` touches:
/// (chunk index, start within chunk, end within chunk, start within range).
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let end = offset + len;
    let first = offset / CHUNK_BYTES;
    let last = if len == 0 { first } else { (end - 1) / CHUNK_BYTES + 1 };
    (first..last).map(move |k| {
        let chunk_start = k * CHUNK_BYTES;
        let from = offset.max(chunk_start);
        let to = end.min(chunk_start + CHUNK_BYTES);
        (k, (from - chunk_start) as usize, (to - chunk_start) as usize, (from - offset) as usize)
    })
}

impl SparseData {
    /// Bytes charged to this file.
    pub(super) fn stored_bytes(&self) -> u64 {
        self.stored_bytes
    }

    /// How many more bytes would be stored after writing `len` bytes at
    /// `offset` (the caller reserves them before calling [`Self::write`]).
    /// `offset + len` must not overflow.
    pub(super) fn write_growth(&self, offset: u64, len: u64) -> u64 {
        pieces(offset, len)
            .map(|(k, _, to, _)| {
                let have = self.chunks.get(&k).map_or(0, |c| c.len());
                to.saturating_sub(have) as u64
            })
            .sum()
    }

    /// Store `data` at `offset`. Bytes between the old stored end of a chunk
    /// and `offset` become explicit zeros (they were holes, reading as zeros
    /// anyway), which [`Self::write_growth`] already counted.
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) {
        for (k, from, to, src) in pieces(offset, data.len() as u64) {
            let chunk = self.chunks.entry(k).or_default();
            if chunk.len() < to {
                self.stored_bytes += (to - chunk.len()) as u64;
                chunk.resize(to, 0);
            }
            chunk[from..to].copy_from_slice(&data[src..src + (to - from)]);
        }
    }

    /// Drop everything at or beyond `size`; returns the bytes released.
    pub(super) fn truncate(&mut self, size: u64) -> u64 {
        let before = self.stored_bytes;
        let keep_chunks = size.div_ceil(CHUNK_BYTES);
        let dropped = self.chunks.split_off(&keep_chunks);
        self.stored_bytes -= dropped.values().map(|c| c.len() as u64).sum::<u64>();
        let within = (size % CHUNK_BYTES) as usize;
        if within > 0 {
            if let Some(last) = self.chunks.get_mut(&(size / CHUNK_BYTES)) {
                if last.len() > within {
                    self.stored_bytes -= (last.len() - within) as u64;
                    last.truncate(within);
                }
            }
        }
        before - self.stored_bytes
    }

    /// Make `[offset, offset+len)` a hole: whole chunks inside it are dropped,
    /// the rest zeroed where stored; returns the bytes released.
    pub(super) fn punch(&mut self, offset: u64, len: u64) -> u64 {
        let before = self.stored_bytes;
        let end = offset.saturating_add(len);
        for (k, from, to, _) in pieces(offset, end - offset) {
            if from == 0 && to as u64 == CHUNK_BYTES {
                if let Some(c) = self.chunks.remove(&k) {
                    self.stored_bytes -= c.len() as u64;
                }
            } else if let Some(c) = self.chunks.get_mut(&k) {
                let to = to.min(c.len());
                if to > from {
                    c[from..to].fill(0);
                }
            }
        }
        before - self.stored_bytes
    }

    /// The first stored chunk at or after `offset`'s (where data may start), if any.
    pub(super) fn next_stored(&self, offset: u64) -> Option<u64> {
        let k = offset / CHUNK_BYTES;
        self.chunks.range(k..).find(|(_, c)| !c.is_empty()).map(|(k, _)| (k * CHUNK_BYTES).max(offset))
    }

    /// The `len` bytes at `offset`; the caller has already clamped the range
    /// to the file size, so anything not stored is a hole.
    pub(super) fn read(&self, offset: u64, len: usize) -> Bytes {
        let mut out = BytesMut::zeroed(len);
        for (k, from, to, dst) in pieces(offset, len as u64) {
            if let Some(chunk) = self.chunks.get(&k) {
                let have_to = to.min(chunk.len());
                if have_to > from {
                    out[dst..dst + (have_to - from)].copy_from_slice(&chunk[from..have_to]);
                }
            }
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain vector model of the same file, to compare against.
    fn model_write(model: &mut Vec<u8>, offset: usize, data: &[u8]) {
        if model.len() < offset + data.len() {
            model.resize(offset + data.len(), 0);
        }
        model[offset..offset + data.len()].copy_from_slice(data);
    }

    #[test]
    fn writes_across_chunk_boundaries_read_back() {
        let mut d = SparseData::default();
        let mut model = Vec::new();
        let c = CHUNK_BYTES as usize;
        let cases: [(usize, usize); 5] = [(0, 10), (c - 3, 7), (3 * c + 5, 2 * c + 1), (c / 2, c), (10, 0)];
        for (i, &(off, len)) in cases.iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            let growth = d.write_growth(off as u64, len as u64);
            let before = d.stored_bytes();
            d.write(off as u64, &data);
            assert_eq!(d.stored_bytes() - before, growth);
            model_write(&mut model, off, &data);
        }
        assert_eq!(&d.read(0, model.len())[..], &model[..]);
        assert_eq!(&d.read(c as u64 - 1, 5)[..], &model[c - 1..c + 4]);
    }

    #[test]
    fn holes_cost_nothing_and_read_as_zeros() {
        let mut d = SparseData::default();
        d.write(10 * CHUNK_BYTES, b"xyz");
        assert_eq!(d.stored_bytes(), 3);
        let r = d.read(10 * CHUNK_BYTES - 2, 6);
        assert_eq!(&r[..], b"\0\0xyz\0");
    }

    #[test]
    fn truncate_releases_and_never_resurrects() {
        let mut d = SparseData::default();
        let data = vec![7u8; 3 * CHUNK_BYTES as usize];
        d.write(0, &data);
        let released = d.truncate(CHUNK_BYTES + 5);
        assert_eq!(released, 2 * CHUNK_BYTES - 5);
        assert_eq!(d.stored_bytes(), CHUNK_BYTES + 5);
        // Growing back: the cut bytes are holes now.
        let r = d.read(CHUNK_BYTES, 10);
        assert_eq!(&r[..], &[7, 7, 7, 7, 7, 0, 0, 0, 0, 0]);
        assert_eq!(d.truncate(0), CHUNK_BYTES + 5);
        assert_eq!(d.stored_bytes(), 0);
    }
}
