//! The one error type of the benchmark library.

use std::path::PathBuf;

/// Why a benchmark command failed. Each variant says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A configuration value is out of its allowed range: fix the flag named in the message.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The target file system refused an operation the benchmark needs (create, write, fsync,
    /// close, remove). The benchmark stops: a partial run would report misleading numbers.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed (`create`, `write`, `fsync`, `close`, ...).
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The operating system's answer.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing a JSON report failed (unreadable file, or not a report of ours).
    #[error("report {path}: {message}")]
    Report {
        /// The report file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },
    /// Drawing a plot failed (unwritable output path, or nothing to draw).
    #[error("plot {path}: {message}")]
    Plot {
        /// The SVG or PNG file being drawn.
        path: PathBuf,
        /// The plotting library's message.
        message: String,
    },
}

impl BenchError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }
}
