//! An opt-in trace of READ and WRITE offsets in the order the backend ran them.
//!
//! Rago et al. show that a server with many worker threads can hand a
//! client's sequential stream to the file system out of order, defeating
//! read-ahead and write clustering. `bench stream` compares the order a
//! client sent with the order recorded here. The trace is off by default;
//! when on, each entry takes a sequence number just before the backend call
//! (so the order is the order calls reached the backend) and the trace stops
//! growing at a fixed number of entries.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether an entry was a READ or a WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    Read,
    Write,
}

/// One backend READ or WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoEvent {
    /// Position in backend execution order (0, 1, 2, …).
    pub seq: u64,
    pub kind: IoKind,
    /// The file's fileid (0 if the backend returned no attributes).
    pub fileid: u64,
    pub offset: u64,
    pub count: u32,
}

/// The trace.
#[derive(Debug)]
pub(crate) struct IoTrace {
    next: AtomicU64,
    events: Mutex<Vec<IoEvent>>,
    /// Most entries kept; later calls are not recorded.
    max_events: usize,
}

impl IoTrace {
    pub(crate) fn new(max_events: usize) -> Self {
        IoTrace { next: AtomicU64::new(0), events: Mutex::new(Vec::new()), max_events }
    }

    /// Take the next sequence number: call just before the backend call.
    pub(crate) fn start(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn record(&self, ev: IoEvent) {
        let mut events = self.events.lock();
        if events.len() < self.max_events {
            events.push(ev);
        }
    }

    /// Every event, in backend execution order.
    pub(crate) fn events(&self) -> Vec<IoEvent> {
        let mut v = self.events.lock().clone();
        v.sort_by_key(|e| e.seq);
        v
    }
}

impl IoEvent {
    /// The trace file line: `R|W fileid offset count`.
    pub fn to_line(&self) -> String {
        let k = match self.kind {
            IoKind::Read => 'R',
            IoKind::Write => 'W',
        };
        format!("{k} {} {} {}", self.fileid, self.offset, self.count)
    }
}
