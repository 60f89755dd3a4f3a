//! Request ordering by arrival (Rago et al., "eager strategies"): READs and
//! WRITEs of one file that one connection has in flight together enter the
//! backend in the order they arrived.
//!
//! A client streams a file by sending calls in offset order, several at
//! once. With several service threads each taking one call, the second
//! call can reach the file system before the first, and the file system
//! sees a random pattern: read-ahead collapses, writes are not clustered.
//! Each such call gets a ticket (its arrival number on the connection)
//! when it is read; before its backend call it waits until no earlier
//! ticket of the same file is still waiting, and it keeps its place until
//! the backend call returns. The calls of one file from one connection
//! therefore run one after the other, in order; that costs nothing on a
//! local file system, where writes to one file hold the inode's lock
//! anyway and a sequential reader is served from read-ahead. Other files
//! and other connections are not held up.
//!
//! The order is an optimisation, never a promise NFS makes: a call whose
//! turn has not come within [`TURN_WAIT_MAX`] (an earlier call of its file
//! is stuck, waiting on a cluster that does not answer) goes ahead anyway,
//! so a stuck call holds no more threads than its own.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a call waits for an earlier call of its file.
pub(crate) const TURN_WAIT_MAX: Duration = Duration::from_secs(15);

/// The tickets of one connection.
#[derive(Debug, Default)]
pub(crate) struct IoOrder {
    /// Arrival number → file, for calls that have not entered the backend.
    waiting: Mutex<BTreeMap<u64, u64>>,
    turn: Condvar,
}

impl IoOrder {
    /// Take a ticket for call `seq` on `file`. Called in arrival order
    /// (while reading the connection).
    pub(crate) fn ticket(self: &Arc<Self>, seq: u64, file: u64) -> Ticket {
        self.waiting.lock().insert(seq, file);
        Ticket { order: self.clone(), seq }
    }

    fn wait_turn(&self, seq: u64, max: Duration) {
        let deadline = Instant::now() + max;
        let mut w = self.waiting.lock();
        let Some(&file) = w.get(&seq) else { return };
        while w.range(..seq).any(|(_, f)| *f == file) {
            if self.turn.wait_until(&mut w, deadline).timed_out() {
                tracing::debug!("a READ or WRITE waited {max:?} for an earlier one of its file: going ahead");
                return;
            }
        }
    }

    fn leave(&self, seq: u64) {
        if self.waiting.lock().remove(&seq).is_some() {
            self.turn.notify_all();
        }
    }
}

/// A call's place in its connection's order. Dropping it without taking
/// the turn (the call failed before reaching the backend) lets later calls
/// go.
#[derive(Debug)]
pub(crate) struct Ticket {
    order: Arc<IoOrder>,
    seq: u64,
}

impl Ticket {
    /// Wait until every earlier call of the same file is done in the
    /// backend; the call keeps its place until the returned turn is
    /// dropped (when its own backend call has returned).
    pub(crate) fn wait_turn(&self) -> Turn<'_> {
        self.wait_turn_within(TURN_WAIT_MAX)
    }

    fn wait_turn_within(&self, max: Duration) -> Turn<'_> {
        self.order.wait_turn(self.seq, max);
        Turn { ticket: self }
    }
}

/// A call's turn in the backend: later calls of the file wait until it is
/// dropped.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    ticket: &'a Ticket,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.ticket.order.leave(self.ticket.seq);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.order.leave(self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_calls_of_a_file_wait_for_earlier_ones_others_do_not() {
        let order = Arc::new(IoOrder::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let first = order.ticket(1, 10);
        let other_file = order.ticket(2, 20);
        let second = order.ticket(3, 10);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _turn = second.wait_turn();
                tx.send("second").unwrap();
            });
            // A call on another file is not held up by file 10's.
            drop(other_file.wait_turn());
            let turn = first.wait_turn();
            assert!(rx.try_recv().is_err(), "the second call of file 10 went before the first was done");
            drop(turn);
            assert_eq!(rx.recv().unwrap(), "second");
        });
    }

    #[test]
    fn a_stuck_call_holds_later_ones_only_for_a_while() {
        let order = Arc::new(IoOrder::default());
        let stuck = order.ticket(1, 10);
        let later = order.ticket(2, 10);
        let started = Instant::now();
        drop(later.wait_turn_within(Duration::from_millis(50)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(stuck);
    }

    #[test]
    fn a_dropped_ticket_lets_later_calls_go() {
        let order = Arc::new(IoOrder::default());
        let first = order.ticket(1, 10);
        let second = order.ticket(2, 10);
        drop(first);
        drop(second.wait_turn());
        assert!(order.waiting.lock().is_empty());
    }
}
