//! A deadline for calls that wait on other machines.
//!
//! A backend over a cluster file system ([`eagernfs_vfs::Backend::remote`])
//! can leave a call waiting for as long as the cluster does not answer (an
//! MDS down, no standby yet), and nothing can cancel it. Its client would
//! wait as long, with a hard mount for ever. So such calls are registered
//! here while they run, and the watchdog answers one still running after
//! the deadline with NFS3ERR_JUKEBOX, NFSv3's "try again later" (clients
//! retry after a few seconds, as they do when knfsd says it). Whichever
//! comes first, that answer or the call's own, is sent; the other is
//! dropped. Calls whose wait grows with the data they move (COMMIT, stable
//! and large WRITEs, large READs) get [`PATIENT_FACTOR`] times as long: a
//! COMMIT of 100 MiB of scattered writes takes the OSDs seconds, and a
//! client told to come back would only ask for the same sync again. The thread stays with its call until the cluster answers; the
//! backend itself refuses new calls while its cluster is stalled, so such
//! threads stay few.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use super::conn::Conn;

/// Where a call's answer goes.
pub(crate) enum ReplyTo {
    Tcp(Arc<Conn>),
    Udp { socket: usize, src: SocketAddr },
}

struct Pending {
    to: ReplyTo,
    xid: u32,
    proc_: u32,
    /// When the call is to be answered at the latest (ns on the service's clock).
    due_ns: u64,
}

/// How many times the deadline a call that moves data gets.
pub(crate) const PATIENT_FACTOR: u64 = 6;

/// The calls of remote exports now running.
#[derive(Default)]
pub(crate) struct Deadlines {
    slots: Mutex<Vec<Option<Pending>>>,
}

/// A registered call: [`Deadlines::finish`] says whether it was answered already.
pub(crate) struct Registered(usize);

/// An answer the watchdog owes.
pub(crate) struct Overdue {
    pub(crate) to: ReplyTo,
    pub(crate) xid: u32,
    pub(crate) proc_: u32,
}

impl Deadlines {
    /// Register NFSv3 call `record` (its xid and procedure are read from
    /// it), to be answered by `due_ns` at the latest.
    pub(crate) fn register(&self, to: ReplyTo, record: &[u8], due_ns: u64) -> Option<Registered> {
        let word = |at: usize| record.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let (xid, proc_) = (word(0)?, word(20)?);
        let p = Pending { to, xid, proc_, due_ns };
        let mut slots = self.slots.lock();
        let i = match slots.iter().position(Option::is_none) {
            Some(i) => {
                slots[i] = Some(p);
                i
            }
            None => {
                slots.push(Some(p));
                slots.len() - 1
            }
        };
        Some(Registered(i))
    }

    /// The call returned: `true` if it is still to be answered (its answer
    /// goes), `false` if the watchdog answered it (its answer is dropped).
    pub(crate) fn finish(&self, r: Registered) -> bool {
        self.slots.lock()[r.0].take().is_some()
    }

    /// Take every call due before `now_ns`: the caller answers them.
    pub(crate) fn overdue(&self, now_ns: u64) -> Vec<Overdue> {
        let mut slots = self.slots.lock();
        let mut out = Vec::new();
        for slot in slots.iter_mut() {
            if slot.as_ref().is_some_and(|p| p.due_ns < now_ns) {
                let p = slot.take().expect("checked");
                out.push(Overdue { to: p.to, xid: p.xid, proc_: p.proc_ });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(xid: u32, proc_: u32) -> Vec<u8> {
        [xid, 0, 2, 100003, 3, proc_].iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    fn udp() -> ReplyTo {
        ReplyTo::Udp { socket: 0, src: "127.0.0.1:1".parse().unwrap() }
    }

    #[test]
    fn the_first_answer_wins() {
        let d = Deadlines::default();
        let early = d.register(udp(), &call(7, 8), 100).unwrap();
        let late = d.register(udp(), &call(8, 1), 500).unwrap();
        let due = d.overdue(200);
        assert_eq!(due.iter().map(|o| (o.xid, o.proc_)).collect::<Vec<_>>(), vec![(7, 8)]);
        assert!(!d.finish(early), "answered by the watchdog: the call's own answer is dropped");
        assert!(d.finish(late), "answered by the call");
        assert!(d.overdue(u64::MAX).is_empty());
        assert!(d.register(udp(), &[0; 8], 0).is_none(), "too short to name the call");
    }
}
