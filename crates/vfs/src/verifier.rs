//! The write verifier backends return with every WRITE and COMMIT.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Verifier;

/// Random per backend instance, replaced whenever unstable data may have
/// been lost: a client that sees it change resends what it has not
/// committed (RFC 1813 §3.3.7).
pub(crate) struct WriteVerifier(AtomicU64);

impl WriteVerifier {
    pub(crate) fn new() -> Self {
        WriteVerifier(AtomicU64::new(rand::random()))
    }

    pub(crate) fn get(&self) -> Verifier {
        self.0.load(Ordering::SeqCst).to_be_bytes()
    }

    /// Pick a new verifier, different from the current one.
    pub(crate) fn regenerate(&self) {
        let old = self.0.load(Ordering::SeqCst);
        let mut new = rand::random::<u64>();
        while new == old {
            new = rand::random();
        }
        // If another thread regenerated meanwhile, either value is new to
        // clients, which is all that matters.
        let _ = self.0.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst);
        tracing::warn!("write-back failed: write verifier changed so clients resend unstable data");
    }
}
