//! The counters a running journal reports ([`JournalStats`]), named by the [`Backend`] trait.
//!
//! [`Backend`]: crate::Backend

/// Counters of a running journal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    pub records: u64,
    pub bytes: u64,
    /// Group commits (one device sync each).
    pub groups: u64,
    /// Appends that had to wait for the checkpointer to free space.
    pub space_waits: u64,
    pub checkpoints: u64,
    /// Bytes of log in use now, and its size.
    pub used_bytes: u64,
    pub size_bytes: u64,
}
