//! [`Extents`]: a file's dirty bytes as non-overlapping, non-adjacent runs
//! in a `BTreeMap` keyed by offset.
//!
//! Lever & Honeyman (§3.4) found the Linux 2.4 client scanning a per-inode
//! list of page-sized requests on every write(): the cost of a write grew
//! with the number of pending requests. Here an append that continues the
//! last run is O(1) amortised (it extends that run's buffer), any other
//! write costs O(log n + runs it overlaps), and taking a `wsize` piece off
//! the front of a run for a WRITE is O(log n) and copies nothing.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// Runs never cross a multiple of this (the largest WRITE we send).
pub(crate) const BLOCK_BYTES: u64 = 1 << 20;

/// Below this a run grows by doubling (small files stay small); past it,
/// it takes the rest of its block at once.
const GROW_SMALL_MAX: usize = 64 * 1024;

/// Make room in `run` (starting at `run_start`, inside the block ending
/// at `block_end`) for `more` bytes, copying at most [`GROW_SMALL_MAX`].
fn grow_for(run: &mut BytesMut, run_start: u64, more: usize, block_end: u64) {
    let need = run.len() + more;
    if run.capacity() >= need {
        return;
    }
    let room = (block_end - run_start) as usize;
    let want = if need > GROW_SMALL_MAX { room } else { (run.capacity() * 2).clamp(need, GROW_SMALL_MAX) };
    run.reserve(want.max(need) - run.len());
}

/// Dirty byte runs of one file. Invariant: runs neither overlap nor
/// cross a [`BLOCK_BYTES`] boundary; touching runs inside one block are
/// merged; none is empty.
///
/// Keeping each run inside one aligned block bounds what any insert may
/// copy (a run is never reallocated past a block) and makes a full block
/// one buffer, sent as one WRITE without being copied. A single growing
/// buffer per run had to be reallocated and copied whole as it doubled:
/// a 16 MiB copy on the write() that crossed 16 MiB.
#[derive(Debug, Default)]
pub(crate) struct Extents {
    /// Start offset → the run's bytes.
    runs: BTreeMap<u64, BytesMut>,
    /// Sum of all run lengths.
    bytes: u64,
}

impl Extents {
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Total dirty bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of runs.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Store `data` at `offset`, replacing whatever was dirty there.
    /// Returns how many bytes the dirty total grew by (less than
    /// `data.len()` when it overwrote dirty bytes).
    pub(crate) fn insert(&mut self, offset: u64, data: &[u8]) -> u64 {
        let mut grown = 0;
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            // The last block ends at 2^64, which does not fit: saturate.
            let block_start = at & !(BLOCK_BYTES - 1);
            let block_end = (at | (BLOCK_BYTES - 1)).saturating_add(1);
            let n = rest.len().min((block_end - at) as usize);
            grown += self.insert_in_block(at, &rest[..n], block_start..block_end);
            at += n as u64;
            rest = &rest[n..];
        }
        grown
    }

    /// [`Extents::insert`] of data that lies inside `block`.
    fn insert_in_block(&mut self, offset: u64, data: &[u8], block: Range<u64>) -> u64 {
        let len = data.len() as u64;
        let end = offset + len;
        let Range { start: block_start, end: block_end } = block;
        // The sequential-writer case: continue the last run in place.
        if let Some(mut last) = self.runs.last_entry() {
            let run_start = *last.key();
            let run = last.get_mut();
            let run_end = run_start + run.len() as u64;
            if run_end == offset && offset != block_start {
                grow_for(run, run_start, len as usize, block_end);
                run.extend_from_slice(data);
                self.bytes += len;
                return len;
            }
        }
        // Inside one run: overwrite in place.
        if let Some((k, run)) = self.runs.range_mut(..=offset).next_back() {
            if k + run.len() as u64 >= end {
                let at = (offset - k) as usize;
                run[at..at + data.len()].copy_from_slice(data);
                return 0;
            }
        }
        // Runs this one merges with: only those in the same block.
        let touching: Vec<u64> =
            self.touching(offset, end).into_iter().filter(|k| (block_start..block_end).contains(k)).collect();
        if touching.is_empty() {
            // A writer streaming into the next block gets the whole block
            // at once: one allocation and no copies as it fills.
            let streaming = offset == block_start
                && self.runs.range(..offset).next_back().is_some_and(|(k, r)| k + r.len() as u64 == offset);
            let cap = if streaming { BLOCK_BYTES.min(block_end - offset) as usize } else { data.len() };
            let mut run = BytesMut::with_capacity(cap);
            run.extend_from_slice(data);
            self.runs.insert(offset, run);
            self.bytes += len;
            return len;
        }
        let first = touching[0];
        let new_start = first.min(offset);
        let mut new_end = end;
        let mut removed = 0u64;
        let mut old = Vec::with_capacity(touching.len());
        for k in touching {
            let run = self.runs.remove(&k).expect("key was just found");
            removed += run.len() as u64;
            new_end = new_end.max(k + run.len() as u64);
            old.push((k, run));
        }
        let mut merged = BytesMut::zeroed((new_end - new_start) as usize);
        for (k, run) in &old {
            let at = (k - new_start) as usize;
            merged[at..at + run.len()].copy_from_slice(run);
        }
        let at = (offset - new_start) as usize;
        merged[at..at + data.len()].copy_from_slice(data);
        self.runs.insert(new_start, merged);
        let grown = (new_end - new_start) - removed;
        self.bytes += grown;
        grown
    }

    /// Store `data` at `offset` only where nothing is dirty yet: older
    /// data being put back (a resend after a verifier change) must never
    /// cover newer writes. Returns the bytes added.
    pub(crate) fn insert_under(&mut self, offset: u64, data: &Bytes) -> u64 {
        let end = offset + data.len() as u64;
        let covered: Vec<Range<u64>> =
            self.touching(offset, end).into_iter().map(|k| k..k + self.runs[&k].len() as u64).collect();
        let mut added = 0;
        for gap in subtract(offset..end, &covered) {
            let lo = (gap.start - offset) as usize;
            let hi = (gap.end - offset) as usize;
            added += self.insert(gap.start, &data[lo..hi]);
        }
        added
    }

    /// Keys of runs that overlap or touch `[start, end)`, in order.
    fn touching(&self, start: u64, end: u64) -> Vec<u64> {
        let mut keys = Vec::new();
        if let Some((k, run)) = self.runs.range(..start).next_back() {
            if k + run.len() as u64 >= start {
                keys.push(*k);
            }
        }
        keys.extend(self.runs.range(start..=end).map(|(k, _)| *k));
        keys
    }

    /// Length of the run holding byte `pos`, if it is dirty. O(log n).
    pub(crate) fn run_len_at(&self, pos: u64) -> Option<u64> {
        let (k, run) = self.runs.range(..=pos).next_back()?;
        let n = run.len() as u64;
        (k + n > pos).then_some(n)
    }

    /// Runs in offset order as (start, length).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.runs.iter().map(|(k, b)| (*k, b.len()))
    }

    /// Remove and return the first `n` bytes of the run starting at `start`.
    pub(crate) fn take_front(&mut self, start: u64, n: usize) -> Bytes {
        let mut run = self.runs.remove(&start).expect("take_front of a run that exists");
        let n = n.min(run.len());
        let piece = run.split_to(n).freeze();
        if !run.is_empty() {
            self.runs.insert(start + n as u64, run);
        }
        self.bytes -= n as u64;
        piece
    }

    /// Drop everything at or beyond `size` (a truncation). Returns the
    /// bytes dropped.
    pub(crate) fn truncate(&mut self, size: u64) -> u64 {
        let before = self.bytes;
        let tail: Vec<u64> = self.runs.range(size..).map(|(k, _)| *k).collect();
        for k in tail {
            let run = self.runs.remove(&k).expect("key was just found");
            self.bytes -= run.len() as u64;
        }
        if let Some(mut last) = self.runs.last_entry() {
            let start = *last.key();
            let run = last.get_mut();
            if start + run.len() as u64 > size {
                let keep = (size - start) as usize;
                let cut = run.len() - keep;
                run.truncate(keep);
                self.bytes -= cut as u64;
            }
        }
        before - self.bytes
    }

    /// Drop everything. Returns the bytes dropped.
    pub(crate) fn clear(&mut self) -> u64 {
        let b = self.bytes;
        self.runs.clear();
        self.bytes = 0;
        b
    }

    /// Whether any dirty byte falls in `[lo, hi)`.
    pub(crate) fn overlaps(&self, lo: u64, hi: u64) -> bool {
        self.runs.range(..hi).next_back().is_some_and(|(k, run)| k + run.len() as u64 > lo)
    }

    /// Copy the dirty bytes that fall in `[offset, offset + out.len())`
    /// into `out`. Returns whether anything was copied.
    pub(crate) fn overlay(&self, offset: u64, out: &mut [u8]) -> bool {
        let end = offset + out.len() as u64;
        let mut any = false;
        for (k, run) in self.runs.range(..end).rev() {
            let run_end = k + run.len() as u64;
            if run_end <= offset {
                break;
            }
            any |= copy_overlap(*k, run, offset, out);
        }
        any
    }
}

/// Copy the part of `src` (which starts at file offset `src_at`) that
/// overlaps `out` (which starts at `out_at`). Returns whether they overlapped.
pub(crate) fn copy_overlap(src_at: u64, src: &[u8], out_at: u64, out: &mut [u8]) -> bool {
    let lo = src_at.max(out_at);
    let hi = (src_at + src.len() as u64).min(out_at + out.len() as u64);
    if lo >= hi {
        return false;
    }
    let n = (hi - lo) as usize;
    let s = (lo - src_at) as usize;
    let d = (lo - out_at) as usize;
    out[d..d + n].copy_from_slice(&src[s..s + n]);
    true
}

/// The parts of `r` not covered by any range in `covered` (which may be
/// unsorted and overlap each other), in order.
pub(crate) fn subtract(r: Range<u64>, covered: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut c: Vec<Range<u64>> =
        covered.iter().filter(|c| c.start < r.end && c.end > r.start).cloned().collect();
    c.sort_by_key(|c| c.start);
    let mut out = Vec::new();
    let mut pos = r.start;
    for c in c {
        if c.start > pos {
            out.push(pos..c.start.min(r.end));
        }
        pos = pos.max(c.end);
        if pos >= r.end {
            break;
        }
    }
    if pos < r.end {
        out.push(pos..r.end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn appends_extend_one_run() {
        let mut e = Extents::default();
        for i in 0..1000u64 {
            assert_eq!(e.insert(i * 8, &[i as u8; 8]), 8);
        }
        assert_eq!(e.runs(), 1);
        assert_eq!(e.bytes(), 8000);
        let p = e.take_front(0, 4096);
        assert_eq!(p.len(), 4096);
        assert_eq!(e.iter().next(), Some((4096, 8000 - 4096)));
        // Appending after a take continues the remaining run.
        e.insert(8000, b"x");
        assert_eq!(e.runs(), 1);
    }

    #[test]
    fn a_streaming_writer_fills_each_block_in_one_buffer_sent_without_copying() {
        let mut e = Extents::default();
        let block = BLOCK_BYTES as usize;
        let write = 8192;
        for i in 0..(3 * block + block / 2) / write {
            e.insert((i * write) as u64, &vec![i as u8; write]);
        }
        // One run per block, the last one partly filled.
        let runs: Vec<(u64, usize)> = e.iter().collect();
        assert_eq!(
            runs,
            vec![(0, block), (BLOCK_BYTES, block), (2 * BLOCK_BYTES, block), (3 * BLOCK_BYTES, block / 2)]
        );
        // Blocks after the first were allocated whole: never regrown.
        for (k, run) in e.runs.iter().skip(1).take(2) {
            assert_eq!(run.capacity(), block, "block at {k}");
        }
        // The first grew by doubling to 64 KiB, then took its block: it holds a whole block.
        // (Its address may or may not have moved: realloc may grow a buffer in place, as it did
        // once with both CPUs busy, so the address says nothing.)
        assert_eq!(e.runs[&0].capacity(), block, "the first block grew to a whole block");
        // A full block leaves as its own buffer.
        let ptr = e.runs[&BLOCK_BYTES].as_ptr();
        let piece = e.take_front(BLOCK_BYTES, block);
        assert_eq!(piece.as_ptr(), ptr);
        assert_eq!(piece.len(), block);
        assert!(piece.iter().enumerate().all(|(j, b)| *b == ((block + j) / write) as u8));
    }

    #[test]
    fn blocks_split_runs_up_to_the_end_of_the_offset_range() {
        let mut e = Extents::default();
        let last_block = u64::MAX - (BLOCK_BYTES - 1);
        e.insert(last_block - 5, &[1; 10]);
        e.insert(u64::MAX - 10, &[2; 10]);
        let runs: Vec<(u64, usize)> = e.iter().collect();
        assert_eq!(runs, vec![(last_block - 5, 5), (last_block, 5), (u64::MAX - 10, 10)]);
        // Filling the gap merges inside the last block only.
        e.insert(last_block, &vec![3; (BLOCK_BYTES - 11) as usize]);
        let runs: Vec<(u64, usize)> = e.iter().collect();
        assert_eq!(runs, vec![(last_block - 5, 5), (last_block, (BLOCK_BYTES - 1) as usize)]);
    }

    #[test]
    fn an_overwrite_inside_a_run_copies_in_place() {
        let mut e = Extents::default();
        e.insert(0, &[1; 1000]);
        let ptr = e.runs[&0].as_ptr();
        assert_eq!(e.insert(100, &[2; 10]), 0);
        assert_eq!(e.runs[&0].as_ptr(), ptr);
        assert_eq!(&e.runs[&0][98..112], &[1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1]);
    }

    #[test]
    fn overwrite_grows_by_new_bytes_only() {
        let mut e = Extents::default();
        e.insert(100, &[1; 100]);
        e.insert(300, &[3; 100]);
        assert_eq!(e.insert(150, &[2; 200]), 100);
        assert_eq!(e.runs(), 1);
        assert_eq!(e.bytes(), 300);
        let mut out = [0u8; 300];
        e.overlay(100, &mut out);
        assert!(out[..50].iter().all(|b| *b == 1));
        assert!(out[50..250].iter().all(|b| *b == 2));
        assert!(out[250..].iter().all(|b| *b == 3));
    }

    #[test]
    fn insert_under_fills_only_gaps() {
        let mut e = Extents::default();
        e.insert(10, &[9; 10]);
        let added = e.insert_under(0, &Bytes::from(vec![1u8; 30]));
        assert_eq!(added, 20);
        let mut out = [0u8; 30];
        e.overlay(0, &mut out);
        assert_eq!(&out[..10], &[1; 10]);
        assert_eq!(&out[10..20], &[9; 10]);
        assert_eq!(&out[20..], &[1; 10]);
    }

    #[test]
    fn truncate_cuts_runs() {
        let mut e = Extents::default();
        e.insert(0, &[1; 10]);
        e.insert(20, &[1; 10]);
        assert_eq!(e.truncate(5), 15);
        assert_eq!(e.bytes(), 5);
    }

    proptest! {
        /// Against a byte-array model: every sequence of inserts leaves the
        /// same bytes, a correct total and the run invariant. The window
        /// sits at the file's start or across a block boundary.
        #[test]
        fn matches_a_byte_model(
            base in prop_oneof![Just(0u64), Just(BLOCK_BYTES - 250)],
            ops in proptest::collection::vec((0u64..400, 1usize..60, any::<u8>(), any::<bool>()), 1..60),
        ) {
            let mut e = Extents::default();
            let mut model: Vec<Option<u8>> = vec![None; 500];
            for (off, len, val, under) in ops {
                let data = vec![val; len];
                if under {
                    e.insert_under(base + off, &Bytes::from(data));
                    for m in &mut model[off as usize..off as usize + len] {
                        m.get_or_insert(val);
                    }
                } else {
                    e.insert(base + off, &data);
                    for m in &mut model[off as usize..off as usize + len] {
                        *m = Some(val);
                    }
                }
            }
            prop_assert_eq!(e.bytes(), model.iter().filter(|b| b.is_some()).count() as u64);
            let mut prev_end = None;
            for (s, l) in e.iter() {
                prop_assert!(l > 0);
                // Runs touch only across a block boundary, and never cross one.
                if let Some(pe) = prev_end { prop_assert!(s > pe || (s == pe && s.is_multiple_of(BLOCK_BYTES))); }
                prop_assert_eq!(s / BLOCK_BYTES, (s + l as u64 - 1) / BLOCK_BYTES);
                prev_end = Some(s + l as u64);
                for i in s..s + l as u64 { prop_assert!(model[(i - base) as usize].is_some()); }
            }
            let mut out = vec![0u8; 500];
            e.overlay(base, &mut out);
            for (i, m) in model.iter().enumerate() {
                if let Some(v) = m { prop_assert_eq!(out[i], *v); }
            }
        }

        #[test]
        fn subtract_covers_exactly(r in (0u64..100, 0u64..100), cs in proptest::collection::vec((0u64..120, 0u64..30), 0..6)) {
            let r = r.0.min(r.1)..r.0.max(r.1);
            let cs: Vec<Range<u64>> = cs.into_iter().map(|(s, l)| s..s + l).collect();
            let gaps = subtract(r.clone(), &cs);
            for x in r.clone() {
                let in_gap = gaps.iter().any(|g| g.contains(&x));
                let covered = cs.iter().any(|c| c.contains(&x));
                prop_assert_eq!(in_gap, !covered);
            }
            for g in &gaps { prop_assert!(g.start < g.end && g.start >= r.start && g.end <= r.end); }
        }
    }
}
