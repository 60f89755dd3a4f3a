//! A progress bar counting operations (the write benchmark's bar counts bytes), drawn from its
//! own thread: the hot path only stores a counter, so drawing never adds to the latencies
//! being measured.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const REFRESH: Duration = Duration::from_millis(100);

struct Shared {
    position: AtomicU64,
    total: AtomicU64,
    message: Mutex<String>,
    done: AtomicBool,
}

/// A running bar; dropping it clears the bar and stops its thread.
pub(crate) struct Meter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Meter {
    /// A bar of `unit`s (`ops`, `clients`, `RPCs`). Nothing is drawn unless `enabled` and
    /// stderr is a terminal, so logs and CI output stay clean.
    pub(crate) fn start(unit: &str, enabled: bool) -> Self {
        let shared = Arc::new(Shared {
            position: AtomicU64::new(0),
            total: AtomicU64::new(1),
            message: Mutex::new(String::new()),
            done: AtomicBool::new(false),
        });
        if !enabled || !std::io::stderr().is_terminal() {
            return Self { shared, thread: None };
        }
        let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
        let template = format!("{{msg}} [{{bar:25}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let drawer = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bench-meter".into())
            .spawn(move || {
                while !drawer.done.load(Ordering::Acquire) {
                    bar.set_length(drawer.total.load(Ordering::Relaxed).max(1));
                    bar.set_position(drawer.position.load(Ordering::Relaxed));
                    if let Ok(m) = drawer.message.lock() {
                        bar.set_message(m.clone());
                    }
                    std::thread::park_timeout(REFRESH);
                }
                bar.finish_and_clear();
            })
            .ok();
        Self { shared, thread }
    }

    /// A new phase: its label and how many units it will count to.
    pub(crate) fn phase(&self, message: &str, total: u64) {
        if let Ok(mut m) = self.shared.message.lock() {
            *m = message.to_string();
        }
        self.shared.total.store(total, Ordering::Relaxed);
        self.shared.position.store(0, Ordering::Relaxed);
    }

    /// The counter the hot path bumps (one relaxed add per unit).
    pub(crate) fn counter(&self) -> MeterCounter {
        MeterCounter(Arc::clone(&self.shared))
    }
}

/// A handle to a bar's position, cheap to clone into tasks.
#[derive(Clone)]
pub(crate) struct MeterCounter(Arc<Shared>);

impl MeterCounter {
    /// One more unit done.
    pub(crate) fn add(&self, n: u64) {
        self.0.position.fetch_add(n, Ordering::Relaxed);
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.shared.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
