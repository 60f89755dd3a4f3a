//! The progress bar on stderr, drawn from its own thread.
//!
//! The measuring thread only stores a counter (one relaxed atomic store per call). Drawing a
//! terminal line takes locks and a write(2) to the terminal; done on the measuring thread it
//! would add its own latency spikes, every few hundred milliseconds, to the very series the
//! spike detector examines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the bar is redrawn.
const REFRESH: Duration = Duration::from_millis(100);

struct Shared {
    position: AtomicU64,
    phase: AtomicUsize,
    done: AtomicBool,
}

/// A running progress bar; dropping it clears the bar and stops its thread.
pub(crate) struct Progress {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts a bar counting to `total` bytes, labelled with `phases[i]` while phase `i` runs.
    /// Nothing is drawn (and no thread started) when `enabled` is false or stderr is not a
    /// terminal, so logs and CI output stay clean.
    pub(crate) fn start(total: u64, phases: Vec<String>, enabled: bool) -> Self {
        let shared = Arc::new(Shared {
            position: AtomicU64::new(0),
            phase: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        });
        if !enabled || !std::io::stderr().is_terminal() {
            return Self { shared, thread: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:25}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        let drawer = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bench-progress".into())
            .spawn(move || {
                let mut shown_phase = usize::MAX;
                while !drawer.done.load(Ordering::Acquire) {
                    let phase = drawer.phase.load(Ordering::Relaxed);
                    if phase != shown_phase {
                        bar.set_message(phases.get(phase).cloned().unwrap_or_default());
                        shown_phase = phase;
                    }
                    bar.set_position(drawer.position.load(Ordering::Relaxed));
                    // Woken early by `Drop`, so finishing never waits out a refresh period.
                    std::thread::park_timeout(REFRESH);
                }
                bar.finish_and_clear();
            })
            .ok();
        Self { shared, thread }
    }

    /// Reports progress: `position` bytes done in total, currently in phase `phase`.
    pub(crate) fn set(&self, phase: usize, position: u64) {
        self.shared.phase.store(phase, Ordering::Relaxed);
        self.shared.position.store(position, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.shared.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
