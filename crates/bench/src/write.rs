//! `bench write`: Lever & Honeyman's sequential write benchmark (USENIX FREENIX 2002, §2.4).
//!
//! One application writes a fresh file in fixed blocks (8 KiB by default, their size), then
//! fsyncs and closes it. Writing a *fresh* file keeps reads out of the picture: the client
//! never has to fetch old data to complete a partial-page write. Three throughputs are
//! reported because file systems differ in when they move data: up to the last write() (what
//! the application sees while the cache absorbs writes; the paper's Fig. 1 and 7), up to the
//! end of fsync (the data is on the server), and up to the end of close (NFS flushes on close;
//! a local file system may not). Every write() call's latency is kept, because averages hide
//! the periodic spikes the paper found (Fig. 2).
//!
//! The target is anything behind [`WriteTarget`]; [`DirectoryTarget`] writes with plain
//! system calls into a directory (a local file system, a FUSE mount, a kernel NFS mount).
//!
//! # Bounds
//! The write loops of the whole command stop at `max_duration`, and each run stops at
//! `max_calls` write() calls; a run cut short says so (`stopped_early`) and a sweep lists the
//! sizes it never reached. fsync and close are waited for: a blocking system call cannot be
//! abandoned halfway, and a number without them would be wrong.

use crate::error::BenchError;
use crate::machine::{describe_machine, filesystem_type};
use crate::progress::Progress;
use crate::report::{StopReason, TargetInfo, WriteReport, WriteRun, WriteSettings, WRITE_SCHEMA};
use crate::spikes::{detect_spikes, SpikeConfig};
use crate::stats::{duration_ns, LatencySummary};
use crate::units::{format_bytes, mb_per_s};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest block size accepted: one write() of more than this is not what the benchmark is
/// about, and the buffer is allocated up front.
pub const MAX_BLOCK_SIZE_BYTES: usize = 64 << 20;
/// Largest `max_calls`: each call keeps an 8-byte latency, so this caps that memory at 400 MB.
pub const MAX_CALLS_LIMIT: u64 = 50_000_000;
/// Largest number of file sizes in one sweep.
pub const MAX_SWEEP_SIZES: usize = 64;
/// Longest `max_duration` accepted (a day).
pub const MAX_DURATION_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// The paper's sweep: file sizes from 25 MB to 450 MB (Fig. 1 and 7), in bytes.
pub fn paper_sweep_sizes() -> Vec<u64> {
    [25, 50, 75, 100, 150, 200, 250, 300, 350, 400, 450].iter().map(|mb| mb * 1_000_000).collect()
}

/// How to run `bench write`. [`Default`] is the paper's setup on a 64 MiB file.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteConfig {
    /// File sizes to write, one run each, in this order: one size is a plain run, several are
    /// a sweep (see [`paper_sweep_sizes`]).
    pub sizes_bytes: Vec<u64>,
    /// Bytes per write() call.
    pub block_size_bytes: usize,
    /// Bound on the time spent in write loops, all runs together.
    pub max_duration: Duration,
    /// Bound on write() calls per run.
    pub max_calls: u64,
    /// Calls slower than this are outliers in the "without outliers" mean (paper: 1 ms).
    pub outlier_threshold: Duration,
    /// Spike definition and periodicity test.
    pub spikes: SpikeConfig,
    /// fsync before close (on by default; off measures what close alone flushes).
    pub fsync: bool,
    /// Leave the written files in place instead of removing them.
    pub keep_files: bool,
    /// Keep every call's latency in the report (needed for the per-call plot).
    pub keep_latencies: bool,
    /// Draw a progress bar on stderr (only ever drawn on a terminal).
    pub progress: bool,
}

impl Default for WriteConfig {
    fn default() -> Self {
        Self {
            sizes_bytes: vec![64 << 20],
            block_size_bytes: 8192,
            max_duration: Duration::from_secs(300),
            max_calls: 10_000_000,
            outlier_threshold: Duration::from_millis(1),
            spikes: SpikeConfig::default(),
            fsync: true,
            keep_files: false,
            keep_latencies: true,
            progress: true,
        }
    }
}

impl WriteConfig {
    /// Checks every bound; the error names the flag to fix.
    pub fn validate(&self) -> Result<(), BenchError> {
        let fail = |m: String| Err(BenchError::Config(m));
        if self.block_size_bytes == 0 || self.block_size_bytes > MAX_BLOCK_SIZE_BYTES {
            return fail(format!("--block must be 1 B to {}", format_bytes(MAX_BLOCK_SIZE_BYTES as u64)));
        }
        if self.sizes_bytes.is_empty() || self.sizes_bytes.len() > MAX_SWEEP_SIZES {
            return fail(format!("give 1 to {MAX_SWEEP_SIZES} file sizes"));
        }
        if self.sizes_bytes.contains(&0) {
            return fail("file sizes must be at least 1 byte".into());
        }
        if self.max_calls == 0 || self.max_calls > MAX_CALLS_LIMIT {
            return fail(format!("--max-calls must be 1 to {MAX_CALLS_LIMIT}"));
        }
        if self.max_duration.is_zero() || self.max_duration > MAX_DURATION_LIMIT {
            return fail(format!(
                "--max-seconds must be above 0 and at most {}",
                MAX_DURATION_LIMIT.as_secs()
            ));
        }
        if !(self.spikes.factor.is_finite() && self.spikes.factor > 1.0) {
            return fail("--spike-factor must be a number above 1".into());
        }
        if !(0.0..1.0).contains(&self.spikes.tolerance_fraction)
            || !(0.0..=1.0).contains(&self.spikes.min_score)
        {
            return fail("spike tolerance must be in [0, 1) and the minimum score in [0, 1]".into());
        }
        Ok(())
    }
}

/// A file the benchmark writes: the three calls it times.
pub trait BenchFile {
    /// One write call; returns the bytes accepted (a short write is allowed).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// Makes the written data durable (fsync(2) for a local file, COMMIT for NFS).
    fn fsync(&mut self) -> std::io::Result<()>;
    /// Closes the file, reporting errors that surface only at close (NFS does).
    fn close(self) -> std::io::Result<()>;
    /// Bytes of written data the client still holds (dirty, in flight, or kept
    /// until a COMMIT), when the target can tell (eagernfs's own client).
    fn held_bytes(&self) -> Option<u64> {
        None
    }
}

/// Most samples of held memory kept per run.
const HELD_SAMPLES_MAX: usize = 4096;

/// Where the benchmark creates its files.
pub trait WriteTarget {
    /// The file type it creates.
    type File: BenchFile;
    /// The target as reports name it.
    fn describe(&self) -> TargetInfo;
    /// Creates `name` fresh (it must not exist: the benchmark measures writing a new file).
    fn create(&self, name: &str) -> Result<Self::File, BenchError>;
    /// Removes `name`.
    fn remove(&self, name: &str) -> Result<(), BenchError>;
}

/// A directory reached with ordinary system calls: a local file system, a FUSE or NFS mount.
#[derive(Debug, Clone)]
pub struct DirectoryTarget {
    dir: PathBuf,
    label: Option<String>,
}

impl DirectoryTarget {
    /// A target writing into `dir`; `label` names it in plots (default: path and fs type).
    pub fn new(dir: impl Into<PathBuf>, label: Option<String>) -> Result<Self, BenchError> {
        let dir = dir.into();
        let meta = std::fs::metadata(&dir).map_err(|e| BenchError::io("stat", &dir, e))?;
        if !meta.is_dir() {
            return Err(BenchError::Config(format!("{} is not a directory", dir.display())));
        }
        Ok(Self { dir, label })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A local file with each benchmark step mapped to exactly one system call.
#[derive(Debug)]
pub struct DirectoryFile {
    file: File,
}

impl BenchFile for DirectoryFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // `Write::write` on a File is exactly one write(2): what the paper times.
        self.file.write(buf)
    }

    fn fsync(&mut self) -> std::io::Result<()> {
        self.file.sync_all()
    }

    fn close(self) -> std::io::Result<()> {
        // Dropping a File ignores close(2)'s result; on NFS that result carries write errors.
        let fd = self.file.into_raw_fd();
        // SAFETY: `into_raw_fd` gave up ownership of an open descriptor, closed exactly once.
        if unsafe { libc::close(fd) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl WriteTarget for DirectoryTarget {
    type File = DirectoryFile;

    fn describe(&self) -> TargetInfo {
        let fs_type = filesystem_type(&self.dir);
        let location = self.dir.display().to_string();
        TargetInfo {
            label: self.label.clone().unwrap_or_else(|| format!("{location} ({fs_type})")),
            location,
            fs_type,
        }
    }

    fn create(&self, name: &str) -> Result<DirectoryFile, BenchError> {
        let path = self.path(name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| BenchError::io("create", &path, e))?;
        Ok(DirectoryFile { file })
    }

    fn remove(&self, name: &str) -> Result<(), BenchError> {
        let path = self.path(name);
        std::fs::remove_file(&path).map_err(|e| BenchError::io("remove", &path, e))
    }
}

/// Runs `bench write` against `target`: one run per size in `config.sizes_bytes`.
pub fn run_write<T: WriteTarget>(target: &T, config: &WriteConfig) -> Result<WriteReport, BenchError> {
    config.validate()?;
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let start = Instant::now();
    let deadline = start + config.max_duration;
    let total: u64 = config.sizes_bytes.iter().sum();
    let phases = config.sizes_bytes.iter().map(|&s| format!("write {}", format_bytes(s))).collect();
    let progress = Progress::start(total, phases, config.progress);
    // One buffer for every call: filled once with bytes that no file system will find
    // compressible or sparse, so it stores what we write.
    let block = pattern(config.block_size_bytes);

    let mut runs = Vec::with_capacity(config.sizes_bytes.len());
    let mut skipped_sizes_bytes = Vec::new();
    let mut done_bytes = 0u64;
    for (index, &size) in config.sizes_bytes.iter().enumerate() {
        if Instant::now() >= deadline {
            skipped_sizes_bytes.push(size);
            continue;
        }
        let name = format!("eagernfs-bench-write-{}-{index}-{size}.dat", std::process::id());
        let run = write_one(target, &name, size, &block, config, deadline, |written| {
            progress.set(index, done_bytes + written)
        })?;
        done_bytes += size;
        runs.push(run);
    }
    drop(progress);

    Ok(WriteReport {
        schema: WRITE_SCHEMA.to_string(),
        tool_version: concat!("eagernfs-bench ", env!("CARGO_PKG_VERSION")).to_string(),
        started_unix_s,
        machine: describe_machine(),
        target: target.describe(),
        settings: WriteSettings {
            block_size_bytes: config.block_size_bytes as u64,
            fsync: config.fsync,
            max_seconds: config.max_duration.as_secs_f64(),
            max_calls: config.max_calls,
            outlier_threshold_ns: duration_ns(config.outlier_threshold),
            spikes: config.spikes.clone(),
        },
        runs,
        skipped_sizes_bytes,
    })
}

/// Removes the benchmark file when a run fails halfway (unless files are kept), so a failed
/// sweep does not leave hundreds of megabytes behind.
struct Cleanup<'a, T: WriteTarget> {
    target: &'a T,
    name: &'a str,
    armed: bool,
}

impl<T: WriteTarget> Drop for Cleanup<'_, T> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.target.remove(self.name);
        }
    }
}

fn write_one<T: WriteTarget>(
    target: &T,
    name: &str,
    size: u64,
    block: &[u8],
    config: &WriteConfig,
    deadline: Instant,
    on_progress: impl Fn(u64),
) -> Result<WriteRun, BenchError> {
    let error_path = || Path::new(&target.describe().location).join(name);
    let expected_calls = size.div_ceil(block.len() as u64).min(config.max_calls);
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(expected_calls as usize);
    // Held memory, sampled every `held_every` calls (enough for a plot).
    let held_every = (expected_calls / HELD_SAMPLES_MAX as u64).max(1);
    let mut held: Vec<[u64; 2]> = Vec::new();
    let mut held_peak = None::<u64>;

    let start = Instant::now();
    let mut file = target.create(name)?;
    let created = Instant::now();
    let mut cleanup = Cleanup { target, name, armed: !config.keep_files };

    let mut written = 0u64;
    let mut offset_in_block = 0usize;
    let mut stopped_early = None;
    // The end of the previous call doubles as the clock reading for the deadline check, so
    // the loop reads the clock twice per call and no more.
    let mut last = created;
    while written < size {
        if latencies_ns.len() as u64 >= config.max_calls {
            stopped_early = Some(StopReason::MaxCalls);
            break;
        }
        if last >= deadline {
            stopped_early = Some(StopReason::MaxDuration);
            break;
        }
        let want = (block.len() - offset_in_block).min(usize::try_from(size - written).unwrap_or(usize::MAX));
        let before = Instant::now();
        let result = file.write(&block[offset_in_block..offset_in_block + want]);
        let after = Instant::now();
        last = after;
        match result {
            Ok(0) => return Err(BenchError::io("write", error_path(), ErrorKind::WriteZero.into())),
            Ok(n) => {
                latencies_ns.push(duration_ns(after - before));
                if let Some(h) = file.held_bytes() {
                    held_peak = Some(held_peak.unwrap_or(0).max(h));
                    if (latencies_ns.len() as u64).is_multiple_of(held_every) && held.len() < HELD_SAMPLES_MAX
                    {
                        held.push([duration_ns(after - start), h]);
                    }
                }
                written += n as u64;
                offset_in_block = (offset_in_block + n) % block.len();
                on_progress(written);
            }
            // A signal, not the file system: the call is retried and not counted.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(BenchError::io("write", error_path(), e)),
        }
    }
    let writes_elapsed_ns = duration_ns(last - start);

    let (fsync_ns, fsync_elapsed_ns) = if config.fsync {
        let before = Instant::now();
        file.fsync().map_err(|e| BenchError::io("fsync", error_path(), e))?;
        let after = Instant::now();
        (Some(duration_ns(after - before)), Some(duration_ns(after - start)))
    } else {
        (None, None)
    };
    let before = Instant::now();
    file.close().map_err(|e| BenchError::io("close", error_path(), e))?;
    let after = Instant::now();
    let close_ns = duration_ns(after - before);
    let close_elapsed_ns = duration_ns(after - start);

    cleanup.armed = false;
    if !config.keep_files {
        target.remove(name)?;
    }

    let latency = LatencySummary::from_samples(&latencies_ns, config.outlier_threshold);
    let spikes = detect_spikes(&latencies_ns, &config.spikes);
    if !config.keep_latencies {
        latencies_ns = Vec::new();
    }
    Ok(WriteRun {
        file_size_requested_bytes: size,
        bytes_written: written,
        calls: latency.as_ref().map_or(0, |l| l.count),
        stopped_early,
        create_ns: duration_ns(created - start),
        writes_elapsed_ns,
        fsync_ns,
        fsync_elapsed_ns,
        close_ns,
        close_elapsed_ns,
        mb_per_s_writes: mb_per_s(written, writes_elapsed_ns),
        mb_per_s_fsync: fsync_elapsed_ns.and_then(|ns| mb_per_s(written, ns)),
        mb_per_s_close: mb_per_s(written, close_elapsed_ns),
        latency,
        spikes,
        latencies_ns,
        held_peak_bytes: held_peak,
        held_samples: held,
    })
}

/// A block of pseudo-random bytes (xorshift64): incompressible, never all zeros.
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut block = Vec::with_capacity(len + 8);
    while block.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        block.extend_from_slice(&state.to_le_bytes());
    }
    block.truncate(len);
    block
}
