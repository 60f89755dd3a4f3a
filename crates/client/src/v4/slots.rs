//! A session's fore-channel slot table (RFC 8881 §2.10.6), sans-IO.
//!
//! A request takes the lowest free slot the server wants used (at most its
//! `target_highest_slotid`, and never above the slots CREATE_SESSION
//! granted), and carries the slot's next sequence id. Its answer frees the
//! slot and moves the sequence on. A request sent again after a lost
//! connection or timeout goes on the same slot with the same sequence id,
//! so the server's reply cache answers it: exactly once. A request whose
//! outcome is never learnt (a soft mount gave up on it, its caller went
//! away) leaves its slot *uncertain*: the next request there goes with the
//! sequence id after it, and if the server says that is misordered (it
//! never saw the lost one), with the lost one's id, as Linux does.

use eagernfs_proto::nfs4::{Sequence4ResOk, Slotid4};

/// One slot.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The sequence id of the last request that went out on it (0: none).
    seq: u32,
    /// A request holds it.
    busy: bool,
    /// The last request's outcome is unknown (see the module docs).
    uncertain: bool,
}

/// A slot taken for one request, and the sequence id to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) slot: Slotid4,
    pub(crate) seq: u32,
}

/// The slot table of one session.
#[derive(Debug)]
pub(crate) struct SlotTable {
    slots: Vec<Slot>,
    /// The highest slot id the server wants used (`target_highest_slotid`).
    target: Slotid4,
}

impl SlotTable {
    /// `granted` slots (CREATE_SESSION's `ca_maxrequests`; at least one).
    pub(crate) fn new(granted: u32) -> SlotTable {
        let n = granted.clamp(1, SLOTS_MAX);
        SlotTable { slots: vec![Slot::default(); n as usize], target: n - 1 }
    }

    /// Slots granted.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The lowest free slot at or below the target, with its next sequence id.
    pub(crate) fn take(&mut self) -> Option<Ticket> {
        let top = (self.target as usize).min(self.slots.len() - 1);
        let (i, s) = self.slots[..=top].iter_mut().enumerate().find(|(_, s)| !s.busy)?;
        s.busy = true;
        Some(Ticket { slot: i as Slotid4, seq: s.seq.wrapping_add(1) })
    }

    /// The highest slot id in use (SEQUENCE's `highest_slotid`).
    pub(crate) fn highest_in_use(&self) -> Slotid4 {
        self.slots.iter().rposition(|s| s.busy).unwrap_or(0) as Slotid4
    }

    /// The server answered `t` (its SEQUENCE succeeded): the slot is free
    /// and its sequence moved on; the server's wishes for the table apply.
    pub(crate) fn answered(&mut self, t: Ticket, reply: &Sequence4ResOk) {
        if let Some(s) = self.slots.get_mut(t.slot as usize) {
            *s = Slot { seq: t.seq, busy: false, uncertain: false };
        }
        // The server may lower the target (use fewer slots) or raise it back,
        // never beyond what it can accept now or what it granted.
        self.target = reply.target_highest_slotid.min(reply.highest_slotid);
    }

    /// `t` went out but its outcome is unknown: free the slot, uncertain.
    pub(crate) fn abandoned(&mut self, t: Ticket) {
        if let Some(s) = self.slots.get_mut(t.slot as usize) {
            *s = Slot { seq: t.seq, busy: false, uncertain: true };
        }
    }

    /// The server ran `t` but kept no reply: free, sequence moved on.
    pub(crate) fn consumed(&mut self, t: Ticket) {
        if let Some(s) = self.slots.get_mut(t.slot as usize) {
            *s = Slot { seq: t.seq, busy: false, uncertain: false };
        }
    }

    /// `t` never reached the server (or the server refused its SEQUENCE
    /// without taking its sequence id): free the slot, sequence unchanged.
    pub(crate) fn unused(&mut self, t: Ticket) {
        if let Some(s) = self.slots.get_mut(t.slot as usize) {
            s.busy = false;
        }
    }

    /// The server said `t` is misordered (NFS4ERR_SEQ_MISORDERED). If the
    /// slot's previous request was lost, the server never saw it: `t` goes
    /// again with that request's sequence id (the new ticket). Otherwise
    /// there is nothing to fix (`None`: the session is out of step).
    pub(crate) fn misordered(&mut self, t: Ticket) -> Option<Ticket> {
        let s = self.slots.get_mut(t.slot as usize)?;
        if !s.uncertain {
            return None;
        }
        s.uncertain = false;
        s.seq = t.seq.wrapping_sub(2);
        Some(Ticket { slot: t.slot, seq: t.seq.wrapping_sub(1) })
    }

    /// The server says slot ids above `highest` are not to be used (a
    /// BADSLOT or BAD_HIGH_SLOT answer).
    pub(crate) fn shrink(&mut self, highest: Slotid4) {
        self.target = self.target.min(highest);
    }
}

/// Most slots a session uses, whatever the server grants.
pub(crate) const SLOTS_MAX: u32 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: Ticket, target: u32, highest: u32) -> Sequence4ResOk {
        Sequence4ResOk {
            sequenceid: t.seq,
            slotid: t.slot,
            highest_slotid: highest,
            target_highest_slotid: target,
            ..Default::default()
        }
    }

    #[test]
    fn slots_are_taken_lowest_first_and_sequence_ids_advance_per_slot() {
        let mut s = SlotTable::new(3);
        let a = s.take().unwrap();
        let b = s.take().unwrap();
        assert_eq!((a, b), (Ticket { slot: 0, seq: 1 }, Ticket { slot: 1, seq: 1 }));
        assert_eq!(s.highest_in_use(), 1);
        s.answered(a, &ok(a, 2, 2));
        assert_eq!(s.take(), Some(Ticket { slot: 0, seq: 2 }), "slot 0 again, next sequence id");
        assert_eq!(s.take(), Some(Ticket { slot: 2, seq: 1 }));
        assert_eq!(s.take(), None, "all three busy");
        // A request that never went out leaves the sequence id where it was.
        s.unused(b);
        assert_eq!(s.take(), Some(Ticket { slot: 1, seq: 1 }));
    }

    #[test]
    fn the_servers_target_limits_the_slots_used() {
        let mut s = SlotTable::new(8);
        let a = s.take().unwrap();
        s.answered(a, &ok(a, 0, 7));
        let b = s.take().unwrap();
        assert_eq!(b.slot, 0);
        assert_eq!(s.take(), None, "the server wants one slot used");
        s.answered(b, &ok(b, 7, 3));
        let _ = s.take().unwrap();
        let _ = s.take().unwrap();
        let _ = s.take().unwrap();
        let _ = s.take().unwrap();
        assert_eq!(s.take(), None, "never beyond the highest the server accepts (3)");
        s.shrink(0);
        assert_eq!(s.len(), 8, "granted slots stay; only use is limited");
    }

    #[test]
    fn a_lost_request_makes_its_slot_uncertain_and_misordered_goes_back_one() {
        let mut s = SlotTable::new(1);
        let a = s.take().unwrap();
        s.answered(a, &ok(a, 0, 0));
        let lost = s.take().unwrap();
        assert_eq!(lost.seq, 2);
        s.abandoned(lost);
        let next = s.take().unwrap();
        assert_eq!(next.seq, 3, "assume the server saw the lost one");
        // It had not: the same request goes with the lost one's sequence id.
        let again = s.misordered(next).unwrap();
        assert_eq!(again, Ticket { slot: 0, seq: 2 });
        s.answered(again, &ok(again, 0, 0));
        assert_eq!(s.take().unwrap().seq, 3);
        // Misordered on a slot that was not uncertain: nothing to fix.
        let mut s = SlotTable::new(1);
        let t = s.take().unwrap();
        assert_eq!(s.misordered(t), None);
    }
}
