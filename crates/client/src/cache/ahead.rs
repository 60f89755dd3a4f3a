//! Which files to read ahead of a program that reads a directory's files
//! in listing order (`grep -r`, `cp -r`, `tar c`, `find -exec cat`): the
//! bookkeeping only, no I/O (`prefetch` does the reading).
//!
//! A READDIR page remembers the inode numbers it listed, in order
//! ([`Listed`]: each file it listed knows the page and its place on it).
//! A *cold* open (one that must ask the server) of the entry right after
//! the previous cold open on the same page, or of the first entry past
//! what was read ahead on it, or a first cold open on a page of its first
//! regular file, is a program going through the page in order (`find
//! -exec` and `tar c` open a directory's files in listing order, from the
//! first): the next entries are read ahead, each under a delegation, so
//! their opens ask nothing. The window starts small and doubles while the
//! program keeps going, as a sequential read-ahead of bytes does; an open
//! out of order resets it; a page on which the server granted no
//! delegation is not read ahead again.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Streams followed at once (programs reading different directories).
const STREAMS_MAX: usize = 8;
/// Files read ahead at a stream's first step.
const WINDOW_FIRST: u32 = 4;
/// Pages read ahead in a row with no delegation, after which nothing is
/// read ahead until a delegation is granted again.
const REFUSED_PAGES_MAX: u32 = 3;
/// No entry: [`Stream::next_at`] when nothing is to follow.
const NEVER: u32 = u32::MAX;

/// Where a file was listed: the READDIR page's inode numbers, in the
/// server's order, and the file's index on it.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) page: Arc<[u64]>,
    pub(crate) index: u32,
    /// The index of the page's first regular file.
    pub(crate) first_file: u32,
}

#[derive(Debug)]
struct Stream {
    /// The page (its address: the same page while anyone holds it).
    page: usize,
    /// The index of the last cold open on the page.
    last_cold: u32,
    /// Entries before this one were read ahead (or opened).
    ahead_until: u32,
    /// Files to read ahead at the next step (0: not started).
    window: u32,
    /// An open of this entry or a later one, answered under its
    /// delegation, reads the next window in the background, so a program
    /// going on in order does not wait for it ([`NEVER`]: none).
    next_at: u32,
    /// The server granted no delegation of what was read ahead here.
    refused: bool,
    /// When it was last used, in [`FilesAhead::clock`] ticks.
    used: u64,
}

/// [`FilesAhead`] with what wakes the opens waiting for a file being read
/// ahead: shared with the tasks that read ahead.
#[derive(Debug, Default)]
pub(crate) struct AheadShared {
    pub(crate) state: Mutex<FilesAhead>,
    pub(crate) done: Notify,
}

/// The streams of cold opens the mount is following.
#[derive(Debug, Default)]
pub(crate) struct FilesAhead {
    streams: Vec<Stream>,
    clock: u64,
    /// Inodes being read ahead now: their opens wait for it, rather than
    /// read them a second time.
    in_flight: HashSet<u64>,
    /// Pages read ahead in a row with no delegation granted: past
    /// [`REFUSED_PAGES_MAX`] the server is taken to grant none (nfs-ganesha
    /// here) until an open brings one again.
    refused_pages: u32,
}

impl Stream {
    /// The next window, from entry `start` of a page of `len` entries:
    /// twice the last (the first: [`WINDOW_FIRST`]), at most `max`.
    fn next_window(&mut self, start: u32, len: u32, max: u32) -> Option<Range<u32>> {
        self.window = if self.window == 0 { WINDOW_FIRST } else { self.window * 2 }.min(max);
        let end = start.saturating_add(self.window).min(len);
        self.ahead_until = end.max(start);
        // Half-way through this window, the next one is read.
        self.next_at = if end < len { start + (end - start) / 2 } else { NEVER };
        (start < end).then_some(start..end)
    }
}

impl FilesAhead {
    /// A cold open of `listed`'s entry: the entries to read ahead now (at
    /// most `max`), if the opens on its page go in order.
    pub(crate) fn cold_open(&mut self, listed: &Listed, max: u32) -> Option<Range<u32>> {
        self.clock += 1;
        let page = Arc::as_ptr(&listed.page) as *const u64 as usize;
        let len = listed.page.len() as u32;
        let index = listed.index;
        let Some(s) = self.streams.iter_mut().find(|s| s.page == page) else {
            if self.streams.len() == STREAMS_MAX {
                let oldest = (0..self.streams.len()).min_by_key(|&i| self.streams[i].used)?;
                self.streams.swap_remove(oldest);
            }
            self.streams.push(Stream {
                page,
                last_cold: index,
                ahead_until: index + 1,
                window: 0,
                next_at: NEVER,
                refused: false,
                used: self.clock,
            });
            // The page's first file, opened first: the program starts the
            // page in order.
            if index != listed.first_file || max == 0 || self.refused_pages >= REFUSED_PAGES_MAX {
                return None;
            }
            return self.streams.last_mut()?.next_window(index + 1, len, max);
        };
        s.used = self.clock;
        let in_order = index == s.last_cold + 1 || index == s.ahead_until;
        s.last_cold = index;
        if !in_order || s.refused || max == 0 || self.refused_pages >= REFUSED_PAGES_MAX {
            s.window = 0;
            s.next_at = NEVER;
            s.ahead_until = s.ahead_until.max(index + 1);
            return None;
        }
        s.next_window(index + 1, len, max)
    }

    /// An open of `listed`'s entry answered under its delegation (no
    /// call): the entries to read ahead now in the background, if the
    /// program has come far enough into what was read ahead for it.
    pub(crate) fn warm_open(&mut self, listed: &Listed, max: u32) -> Option<Range<u32>> {
        let page = Arc::as_ptr(&listed.page) as *const u64 as usize;
        let s = self.streams.iter_mut().find(|s| s.page == page)?;
        if listed.index < s.next_at
            || listed.index >= s.ahead_until
            || s.refused
            || max == 0
            || self.refused_pages >= REFUSED_PAGES_MAX
        {
            return None;
        }
        self.clock += 1;
        s.used = self.clock;
        let start = s.ahead_until;
        s.next_window(start, listed.page.len() as u32, max)
    }

    /// Whether inode `ino` is being read ahead now.
    pub(crate) fn in_flight(&self, ino: u64) -> bool {
        self.in_flight.contains(&ino)
    }

    /// Mark `ino` as being read ahead; false if it is already.
    pub(crate) fn begin(&mut self, ino: u64) -> bool {
        self.in_flight.insert(ino)
    }

    /// `inos` are read ahead (or failed to be).
    pub(crate) fn end(&mut self, inos: &[u64]) {
        for ino in inos {
            self.in_flight.remove(ino);
        }
    }

    /// What was read ahead on `listed`'s page brought no delegation: the
    /// server is not granting them (for now), so reading ahead there would
    /// only read twice.
    pub(crate) fn refused(&mut self, listed: &Listed) {
        let page = Arc::as_ptr(&listed.page) as *const u64 as usize;
        if let Some(s) = self.streams.iter_mut().find(|s| s.page == page) {
            s.refused = true;
        }
        self.refused_pages = self.refused_pages.saturating_add(1);
    }

    /// The server granted a delegation (to a read ahead, or to an open).
    pub(crate) fn granted(&mut self) {
        self.refused_pages = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: u64) -> Arc<[u64]> {
        (100..100 + n).collect::<Vec<_>>().into()
    }

    /// Entry `index` of `page`, whose first file is not among those opened first here.
    fn at(page: &Arc<[u64]>, index: u32) -> Listed {
        Listed { page: page.clone(), index, first_file: NEVER }
    }

    #[test]
    fn a_page_opened_first_at_its_first_file_is_read_ahead_at_once() {
        let p = page(30);
        let first = |index| Listed { page: p.clone(), index, first_file: 2 };
        let mut a = FilesAhead::default();
        assert_eq!(a.cold_open(&first(2), 10), Some(3..7), "the first file, opened first");
        assert_eq!(a.cold_open(&first(7), 10), Some(8..16), "and on in order");
        let q = page(30);
        let other = |index| Listed { page: q.clone(), index, first_file: 2 };
        assert_eq!(a.cold_open(&other(5), 10), None, "another file opened first: no order yet");
        assert_eq!(a.cold_open(&other(2), 10), None, "the first file, but not first");
        let mut b = FilesAhead::default();
        assert_eq!(b.cold_open(&first(2), 0), None, "nothing read ahead with max 0");
    }

    #[test]
    fn opens_in_listing_order_read_ahead_in_growing_windows() {
        let p = page(100);
        let mut a = FilesAhead::default();
        assert_eq!(a.cold_open(&at(&p, 0), 10), None, "one open is no order yet");
        assert_eq!(a.cold_open(&at(&p, 1), 10), Some(2..6));
        // 2..6 were opened under their delegations (no cold open); 6 is next.
        assert_eq!(a.cold_open(&at(&p, 6), 10), Some(7..15));
        assert_eq!(a.cold_open(&at(&p, 15), 10), Some(16..26), "capped at max");
        assert_eq!(a.cold_open(&at(&p, 26), 10), Some(27..37));
    }

    #[test]
    fn opens_answered_under_delegations_read_the_next_window_half_way() {
        let p = page(40);
        let mut a = FilesAhead::default();
        a.cold_open(&at(&p, 0), 10);
        assert_eq!(a.cold_open(&at(&p, 1), 10), Some(2..6));
        assert_eq!(a.warm_open(&at(&p, 2), 10), None, "not half-way yet");
        assert_eq!(a.warm_open(&at(&p, 4), 10), Some(6..14));
        assert_eq!(a.warm_open(&at(&p, 5), 10), None, "that window is read already");
        assert_eq!(a.warm_open(&at(&p, 9), 10), None);
        assert_eq!(a.warm_open(&at(&p, 10), 10), Some(14..24));
        assert_eq!(a.warm_open(&at(&p, 19), 10), Some(24..34));
        assert_eq!(a.warm_open(&at(&p, 29), 10), Some(34..40));
        assert_eq!(a.warm_open(&at(&p, 39), 10), None, "the page's end: nothing more");
        // A file opened again long after, under its delegation: nothing.
        let q = page(40);
        assert_eq!(a.warm_open(&at(&q, 3), 10), None, "no stream on that page");
    }

    #[test]
    fn an_open_out_of_order_reads_nothing_ahead_and_starts_over() {
        let p = page(100);
        let mut a = FilesAhead::default();
        a.cold_open(&at(&p, 0), 10);
        assert_eq!(a.cold_open(&at(&p, 1), 10), Some(2..6));
        assert_eq!(a.cold_open(&at(&p, 40), 10), None);
        assert_eq!(a.cold_open(&at(&p, 7), 10), None);
        assert_eq!(a.cold_open(&at(&p, 8), 10), Some(9..13), "in order again: the first window");
    }

    #[test]
    fn the_window_stops_at_the_page_end_and_a_refusing_server_ends_it() {
        let p = page(5);
        let mut a = FilesAhead::default();
        a.cold_open(&at(&p, 0), 10);
        assert_eq!(a.cold_open(&at(&p, 1), 10), Some(2..5));
        assert_eq!(a.cold_open(&at(&p, 4), 10), None, "nothing left after the last entry");
        let q = page(50);
        a.cold_open(&at(&q, 0), 10);
        assert_eq!(a.cold_open(&at(&q, 1), 10), Some(2..6));
        a.refused(&at(&q, 1));
        assert_eq!(a.cold_open(&at(&q, 2), 10), None, "no delegations: no reading twice");
        assert_eq!(a.cold_open(&at(&q, 3), 0), None);
    }

    #[test]
    fn a_server_that_grants_no_delegations_gets_nothing_read_ahead_until_it_grants_one() {
        let mut a = FilesAhead::default();
        let pages: Vec<_> = (0..REFUSED_PAGES_MAX + 1).map(|_| page(20)).collect();
        for p in &pages[..REFUSED_PAGES_MAX as usize] {
            a.cold_open(&at(p, 0), 10);
            assert!(a.cold_open(&at(p, 1), 10).is_some());
            a.refused(&at(p, 1));
        }
        let last = &pages[REFUSED_PAGES_MAX as usize];
        a.cold_open(&at(last, 0), 10);
        assert_eq!(a.cold_open(&at(last, 1), 10), None, "pages refused in a row: nothing more");
        a.granted();
        assert_eq!(a.cold_open(&at(last, 2), 10), Some(3..7), "a delegation granted: again");
    }

    #[test]
    fn each_page_is_its_own_stream_and_old_ones_make_room() {
        let pages: Vec<_> = (0..=STREAMS_MAX as u64).map(|i| page(10 + i)).collect();
        let mut a = FilesAhead::default();
        for p in &pages {
            assert_eq!(a.cold_open(&at(p, 0), 10), None);
        }
        assert_eq!(a.streams.len(), STREAMS_MAX);
        // The first page's stream was the oldest and went; the last ones stay.
        assert_eq!(a.cold_open(&at(&pages[0], 1), 10), None);
        assert!(a.cold_open(&at(&pages[STREAMS_MAX], 1), 10).is_some());
    }
}
