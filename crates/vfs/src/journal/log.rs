//! The journal's on-disk format, its group commit and its replay scan.
//!
//! # Layout
//! Two header slots of 4 KiB at offsets 0 and 4096 (written alternately, so a
//! torn header write leaves the other intact; the valid one with the higher
//! sequence number wins), then the log area, used as a ring.
//!
//! Positions in the log are *log sequence numbers* (LSNs): byte offsets in an
//! endless log, mapped to the device at `AREA_START + lsn % area`. Every record
//! carries its own LSN, so a record left over from an earlier lap (or an earlier
//! run) never passes for the one expected at that place.
//!
//! A record is a 28-byte head (magic, kind, handle length, total length, LSN,
//! file offset), the file handle, the data, and a CRC-32 (IEEE, `crc32fast`) of all of it.
//! A change of names or attributes is a record of its own kind with no handle
//! and its description (`meta.rs`) as the data.
//! A record never wraps: when one does not fit before the end of the area, a
//! pad record fills the rest (or, when fewer than [`RECORD_MIN`] bytes are left,
//! the rest is skipped by rule).
//!
//! # Group commit
//! Appenders copy their record into a shared buffer and get its end LSN; the
//! first one to wait for durability becomes the leader, writes the whole buffer
//! with one `pwrite` (two at the ring's end) and one `fdatasync`, and wakes the
//! others. Each group is padded to a 4 KiB boundary so that the next group never
//! rewrites a page holding records already acknowledged (a torn page write would
//! otherwise damage them).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::device::LogDevice;

/// Size of one header slot.
pub(crate) const HEADER_SLOT: u64 = 4096;
/// Where the log area starts on the device.
pub(crate) const AREA_START: u64 = 2 * HEADER_SLOT;
/// Groups start on this boundary.
const PAGE: u64 = 4096;
/// Smallest log area accepted.
pub(crate) const AREA_MIN: u64 = 4 << 20;

const MAGIC: &[u8; 8] = b"EAGRJNL1";
/// Written in new headers. Version 2 adds changes of names and attributes
/// (`KIND_META`); a binary that knows only version 1 refuses such a journal
/// (both headers look damaged) rather than replaying half of it.
const VERSION: u32 = 2;
/// Versions this binary replays.
const VERSIONS_READ: [u32; 2] = [1, 2];
const HEADER_BYTES: usize = 68;

const RECORD_MAGIC: u32 = 0x4a52_4543;
/// Fixed part of a record before the handle.
const RECORD_HEAD: usize = 28;
/// The smallest record (a pad record: head and CRC).
pub(crate) const RECORD_MIN: u64 = RECORD_HEAD as u64 + 4;
/// The longest handle a record holds.
pub(crate) const HANDLE_MAX: usize = 64;
/// The most data one record holds (larger writes are split).
pub(crate) const DATA_MAX: usize = 4 << 20;

/// Bytes appended but not yet written that make appenders wait.
const BUFFER_MAX: usize = 64 << 20;

/// What a record asks replay to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Write `data` at `offset`.
    Write { offset: u64, data: Vec<u8> },
    /// Set the file's size (written by version 1; version 2 records a
    /// truncation as a change of attributes).
    Truncate { size: u64 },
    /// A change of names or attributes, encoded by `meta.rs`.
    Meta { payload: Vec<u8> },
}

const KIND_WRITE: u8 = 1;
const KIND_TRUNCATE: u8 = 2;
const KIND_PAD: u8 = 3;
const KIND_META: u8 = 4;

/// One header slot's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub seq: u64,
    pub owner: [u8; 16],
    pub verifier: [u8; 8],
    pub area: u64,
    pub checkpoint: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..40].copy_from_slice(&self.owner);
        b[40..48].copy_from_slice(&self.verifier);
        b[48..56].copy_from_slice(&self.area.to_le_bytes());
        b[56..64].copy_from_slice(&self.checkpoint.to_le_bytes());
        let crc = crc32fast::hash(&b[..64]);
        b[64..68].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_BYTES || &b[0..8] != MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(b[64..68].try_into().ok()?);
        let version = u32::from_le_bytes(b[8..12].try_into().ok()?);
        if crc32fast::hash(&b[..64]) != crc || !VERSIONS_READ.contains(&version) {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Some(Header {
            seq: u64_at(16),
            owner: b[24..40].try_into().ok()?,
            verifier: b[40..48].try_into().ok()?,
            area: u64_at(48),
            checkpoint: u64_at(56),
        })
    }
}

/// What reading the header slots found.
pub(crate) enum HeaderState {
    /// No slot holds a header and the device's start is all zeros: a new journal.
    Fresh,
    /// The newest valid header.
    Valid(Header),
    /// Neither slot is valid but the device is not blank.
    Damaged,
}

pub(crate) fn read_header(dev: &dyn LogDevice) -> io::Result<HeaderState> {
    if dev.size()? < AREA_START {
        return Ok(HeaderState::Fresh);
    }
    let mut slots = vec![0u8; AREA_START as usize];
    dev.read_at(&mut slots, 0)?;
    let a = Header::decode(&slots[..HEADER_SLOT as usize]);
    let b = Header::decode(&slots[HEADER_SLOT as usize..]);
    Ok(match (a, b) {
        (Some(a), Some(b)) => HeaderState::Valid(if a.seq >= b.seq { a } else { b }),
        (Some(h), None) | (None, Some(h)) => HeaderState::Valid(h),
        (None, None) if slots.iter().all(|&x| x == 0) => HeaderState::Fresh,
        (None, None) => HeaderState::Damaged,
    })
}

/// Write `h` into the slot its sequence number picks, and sync.
pub(crate) fn write_header(dev: &dyn LogDevice, h: &Header) -> io::Result<()> {
    let mut slot = vec![0u8; HEADER_SLOT as usize];
    slot[..HEADER_BYTES].copy_from_slice(&h.encode());
    dev.write_at(&slot, (h.seq % 2) * HEADER_SLOT)?;
    dev.sync()
}

/// Encode a record at `lsn` into `out`.
fn encode_record(out: &mut Vec<u8>, lsn: u64, handle: &[u8], op: &RecordRef<'_>) {
    let start = out.len();
    let (kind, offset, data): (u8, u64, &[u8]) = match *op {
        RecordRef::Write { offset, data } => (KIND_WRITE, offset, data),
        RecordRef::Meta { payload } => (KIND_META, 0, payload),
    };
    let total = RECORD_HEAD + handle.len() + data.len() + 4;
    out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    out.push(kind);
    out.push(handle.len() as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(handle);
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A pad record of `len` bytes (at least [`RECORD_MIN`]) at `lsn`.
fn encode_pad(out: &mut Vec<u8>, lsn: u64, len: u64) {
    let start = out.len();
    out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    out.push(KIND_PAD);
    out.push(0);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.resize(start + len as usize, 0);
}

/// A record to append, borrowing its data.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RecordRef<'a> {
    Write { offset: u64, data: &'a [u8] },
    Meta { payload: &'a [u8] },
}

impl RecordRef<'_> {
    fn len(&self, handle: &[u8]) -> u64 {
        let data = match self {
            RecordRef::Write { data, .. } | RecordRef::Meta { payload: data } => data.len(),
        };
        (RECORD_HEAD + handle.len() + data + 4) as u64
    }
}

/// Bytes from `lsn` to the end of the area's lap.
fn to_lap_end(lsn: u64, area: u64) -> u64 {
    area - lsn % area
}

/// A record found by the replay scan.
#[derive(Debug)]
pub(crate) struct Found {
    pub lsn: u64,
    pub handle: Vec<u8>,
    pub op: Op,
}

/// Read the record (or pad) at `lsn`. `Ok(None)`: nothing valid there.
/// On success also returns the LSN after it.
pub(crate) fn read_record(
    dev: &dyn LogDevice,
    area: u64,
    lsn: u64,
) -> io::Result<Option<(u64, Option<Found>)>> {
    let left = to_lap_end(lsn, area);
    if left < RECORD_MIN {
        // Skipped by rule: the next lap starts.
        return Ok(Some((lsn + left, None)));
    }
    let at = AREA_START + lsn % area;
    let mut head = [0u8; RECORD_HEAD];
    dev.read_at(&mut head, at)?;
    let u32_at = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
    if u32_at(0) != RECORD_MAGIC || u64_at(12) != lsn {
        return Ok(None);
    }
    let (kind, hlen, total) = (head[4], head[5] as usize, u32_at(8) as u64);
    if total < RECORD_MIN || total > left {
        return Ok(None);
    }
    if kind == KIND_PAD {
        let mut crc = [0u8; 4];
        dev.read_at(&mut crc, at + RECORD_HEAD as u64)?;
        if crc32fast::hash(&head) != u32::from_le_bytes(crc) {
            return Ok(None);
        }
        return Ok(Some((lsn + total, None)));
    }
    if hlen > HANDLE_MAX || !matches!(kind, KIND_WRITE | KIND_TRUNCATE | KIND_META) {
        return Ok(None);
    }
    let body_len = total as usize - RECORD_HEAD;
    if body_len < hlen + 4 || body_len - hlen - 4 > DATA_MAX {
        return Ok(None);
    }
    let mut body = vec![0u8; body_len];
    dev.read_at(&mut body, at + RECORD_HEAD as u64)?;
    let (payload, crc) = body.split_at(body_len - 4);
    let mut h = crc32fast::Hasher::new();
    h.update(&head);
    h.update(payload);
    if h.finalize() != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Ok(None);
    }
    let handle = payload[..hlen].to_vec();
    let offset = u64_at(20);
    let op = match kind {
        KIND_WRITE => Op::Write { offset, data: payload[hlen..].to_vec() },
        KIND_META => Op::Meta { payload: payload[hlen..].to_vec() },
        _ if payload.len() == hlen => Op::Truncate { size: offset },
        _ => return Ok(None),
    };
    Ok(Some((lsn + total, Some(Found { lsn, handle, op }))))
}

/// The live log: appends, group commit, space.
pub(crate) struct Log {
    dev: Box<dyn LogDevice>,
    area: u64,
    state: Mutex<State>,
    /// Woken when `synced` or `checkpoint` moves, or the leader steps down.
    moved: Condvar,
    /// Woken when appenders wait for space (the checkpointer listens).
    pub(crate) want_space: Condvar,
    pub(crate) counters: Counters,
}

struct State {
    /// Records appended but not written: they start at `buf_lsn`.
    buf: Vec<u8>,
    buf_lsn: u64,
    /// End of the last record appended.
    next: u64,
    /// Everything before this is on the device and synced.
    synced: u64,
    /// Everything before this is in the export's files, synced: free space.
    checkpoint: u64,
    /// A leader is writing and syncing a group.
    flushing: bool,
    /// The device failed a write or sync: nothing more is acknowledged.
    failed: Option<String>,
    /// Appenders waiting for space.
    space_waiters: usize,
}

/// Counters for stats.
#[derive(Default)]
pub(crate) struct Counters {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub groups: AtomicU64,
    pub space_waits: AtomicU64,
    pub checkpoints: AtomicU64,
}

impl Log {
    /// A log continuing at `start` (which is also its checkpoint).
    pub(crate) fn new(dev: Box<dyn LogDevice>, area: u64, start: u64) -> Log {
        Log {
            dev,
            area,
            state: Mutex::new(State {
                buf: Vec::new(),
                buf_lsn: start,
                next: start,
                synced: start,
                checkpoint: start,
                flushing: false,
                failed: None,
                space_waiters: 0,
            }),
            moved: Condvar::new(),
            want_space: Condvar::new(),
            counters: Counters::default(),
        }
    }

    pub(crate) fn device(&self) -> &dyn LogDevice {
        &*self.dev
    }

    pub(crate) fn area(&self) -> u64 {
        self.area
    }

    /// Append one record for `handle` (at most [`HANDLE_MAX`] bytes, data at
    /// most [`DATA_MAX`]); returns the LSN that must be synced for it to be durable.
    /// Waits while the log has no room.
    pub(crate) fn append(&self, handle: &[u8], rec: RecordRef<'_>) -> io::Result<u64> {
        debug_assert!(handle.len() <= HANDLE_MAX);
        let len = rec.len(handle);
        let mut st = self.state.lock();
        let mut waited = false;
        loop {
            if let Some(e) = &st.failed {
                return Err(io::Error::other(e.clone()));
            }
            // Worst case: pad to the lap's end, the record, and the group's pad.
            let need = len + RECORD_MIN + PAGE + PAGE;
            let used = st.next - st.checkpoint;
            if used + need <= self.area && st.buf.len() < BUFFER_MAX {
                break;
            }
            if !waited {
                waited = true;
                self.counters.space_waits.fetch_add(1, Ordering::Relaxed);
            }
            st.space_waiters += 1;
            self.want_space.notify_all();
            // Space frees only once records are synced: make sure someone syncs.
            if !st.buf.is_empty() && !st.flushing {
                st.space_waiters -= 1;
                let target = st.next;
                drop(st);
                self.wait_durable(target)?;
                st = self.state.lock();
                continue;
            }
            self.moved.wait_for(&mut st, Duration::from_millis(100));
            st.space_waiters -= 1;
        }
        let left = to_lap_end(st.next, self.area);
        if left < len {
            let lsn = st.next;
            if left >= RECORD_MIN {
                encode_pad(&mut st.buf, lsn, left);
            } else {
                let n = st.buf.len() + left as usize;
                st.buf.resize(n, 0);
            }
            st.next += left;
        }
        let lsn = st.next;
        encode_record(&mut st.buf, lsn, handle, &rec);
        st.next += len;
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes.fetch_add(len, Ordering::Relaxed);
        Ok(st.next)
    }

    /// End of the last record appended.
    pub(crate) fn appended(&self) -> u64 {
        self.state.lock().next
    }

    /// Everything before this is durable in the log.
    pub(crate) fn synced(&self) -> u64 {
        self.state.lock().synced
    }

    pub(crate) fn checkpoint(&self) -> u64 {
        self.state.lock().checkpoint
    }

    /// Bytes between the checkpoint and the last append.
    pub(crate) fn used(&self) -> u64 {
        let st = self.state.lock();
        st.next - st.checkpoint
    }

    /// Return once everything before `lsn` is durable, writing and syncing
    /// (as the group's leader) if nobody else is.
    pub(crate) fn wait_durable(&self, lsn: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.synced >= lsn {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(io::Error::other(e.clone()));
            }
            if st.flushing {
                self.moved.wait(&mut st);
                continue;
            }
            // Lead a group: take the buffer, padded to a page boundary.
            let end = st.next;
            let aligned = end.next_multiple_of(PAGE);
            let mut pad = aligned - end;
            if pad > 0 && pad < RECORD_MIN {
                pad += PAGE;
            }
            if pad > 0 {
                let left = to_lap_end(end, self.area);
                // A pad never crosses the lap's end: it stops there, and the
                // lap's end is itself on a page boundary.
                let pad = pad.min(left);
                if pad >= RECORD_MIN {
                    encode_pad(&mut st.buf, end, pad);
                } else {
                    let n = st.buf.len() + pad as usize;
                    st.buf.resize(n, 0);
                }
                st.next += pad;
            }
            let group = std::mem::take(&mut st.buf);
            let from = st.buf_lsn;
            let to = st.next;
            st.buf_lsn = to;
            st.flushing = true;
            drop(st);
            let result = self.write_group(from, &group);
            st = self.state.lock();
            st.flushing = false;
            match result {
                Ok(()) => {
                    st.synced = to;
                    self.counters.groups.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::error!("journal write or sync failed: {e}; no more writes are acknowledged");
                    st.failed = Some(format!("journal device failed: {e}"));
                }
            }
            // Reuse the allocation if nobody appended meanwhile.
            if st.buf.is_empty() {
                let mut group = group;
                group.clear();
                if group.capacity() <= 8 << 20 {
                    st.buf = group;
                }
            }
            self.moved.notify_all();
        }
    }

    fn write_group(&self, from: u64, group: &[u8]) -> io::Result<()> {
        let mut lsn = from;
        let mut rest = group;
        while !rest.is_empty() {
            let n = (to_lap_end(lsn, self.area) as usize).min(rest.len());
            self.dev.write_at(&rest[..n], AREA_START + lsn % self.area)?;
            lsn += n as u64;
            rest = &rest[n..];
        }
        self.dev.sync()
    }

    /// Free the log before `lsn`: the caller has made those records' effects durable.
    pub(crate) fn set_checkpoint(&self, lsn: u64) {
        let mut st = self.state.lock();
        if lsn > st.checkpoint {
            st.checkpoint = lsn;
            self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        self.moved.notify_all();
    }

    /// Wait up to `timeout` for appenders to want space; true if they do.
    pub(crate) fn wait_space_wanted(&self, timeout: Duration) -> bool {
        let mut st = self.state.lock();
        if st.space_waiters == 0 {
            self.want_space.wait_for(&mut st, timeout);
        }
        st.space_waiters > 0
    }

    /// Wake the checkpointer (at shutdown).
    pub(crate) fn wake(&self) {
        self.want_space.notify_all();
    }
}
