//! `bench write nfs://…`: the sequential write benchmark through eagernfs's own client.
//!
//! Each benchmark step goes through the caching layer exactly as a FUSE
//! `write(2)` would, minus the kernel: `write` → [`CachedFs::write`] (into the
//! write-back cache, subject to its flow control), `fsync` → [`CachedFs::fsync`]
//! (write back + COMMIT), `close` → [`CachedFs::release`]. So the per-call
//! latencies are the client library's, the thing Lever & Honeyman measured of
//! the Linux client, without FUSE's own costs mixed in.

use crate::error::BenchError;
use crate::report::TargetInfo;
use crate::write::{BenchFile, WriteTarget};
use eagernfs_client::cache::{CachedFs, ROOT_INO};
use eagernfs_client::{Cred, NfsClient, NfsUrl};
use std::io;

/// A directory on an NFS server, reached through the caching client.
pub struct NfsTarget {
    /// Drives the client's tasks (flusher, read-ahead, connections); the
    /// benchmark thread blocks on it for each call.
    runtime: tokio::runtime::Runtime,
    fs: CachedFs<NfsClient>,
    dir_ino: u64,
    cred: Cred,
    url: String,
    label: Option<String>,
}

fn nfs_err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Config(format!("{what}: {e}"))
}

fn io_err(e: eagernfs_client::cache::FsError) -> io::Error {
    io::Error::from_raw_os_error(e.errno())
}

impl NfsTarget {
    /// Mount `url` (its path names the directory to write in) with the URL's options.
    pub fn connect(url: &str, label: Option<String>) -> Result<Self, BenchError> {
        let parsed: NfsUrl = url.parse().map_err(|e| nfs_err(url, e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| nfs_err("starting the client runtime", e))?;
        let (fs, dir_ino, cred) = runtime.block_on(async {
            let client = NfsClient::connect_url(&parsed).await.map_err(|e| nfs_err(url, e))?;
            let cred = client.default_cred();
            let inside = client.path_inside().to_string();
            let opts = client.options().clone();
            let fs = CachedFs::new(client, &opts).await.map_err(|e| nfs_err(url, e))?;
            let mut ino = ROOT_INO;
            for name in inside.split('/').filter(|c| !c.is_empty()) {
                ino = fs.lookup(ino, name.as_bytes(), &cred).await.map_err(|e| nfs_err(url, e))?.ino;
            }
            Ok::<_, BenchError>((fs, ino, cred))
        })?;
        Ok(NfsTarget { runtime, fs, dir_ino, cred, url: url.to_string(), label })
    }
}

/// A file being written through the cache.
pub struct NfsBenchFile {
    handle: tokio::runtime::Handle,
    fs: CachedFs<NfsClient>,
    fh: u64,
    offset: u64,
}

impl BenchFile for NfsBenchFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.handle.block_on(self.fs.write(self.fh, self.offset, buf)).map_err(io_err)?;
        self.offset += n as u64;
        Ok(n as usize)
    }

    fn fsync(&mut self) -> io::Result<()> {
        self.handle.block_on(self.fs.fsync(self.fh)).map_err(io_err)
    }

    fn close(self) -> io::Result<()> {
        self.handle.block_on(self.fs.release(self.fh)).map_err(io_err)
    }

    fn held_bytes(&self) -> Option<u64> {
        // Dirty and in-flight data (the write-back budget) plus data written
        // UNSTABLE and kept until a COMMIT.
        let (dirty, unstable) = self.fs.write_back_bytes();
        Some(dirty + unstable)
    }
}

impl WriteTarget for NfsTarget {
    type File = NfsBenchFile;

    fn describe(&self) -> TargetInfo {
        TargetInfo {
            label: self.label.clone().unwrap_or_else(|| format!("{} (eagernfs client)", self.url)),
            location: self.url.clone(),
            fs_type: "nfs-wire".to_string(),
        }
    }

    fn create(&self, name: &str) -> Result<NfsBenchFile, BenchError> {
        let (_, fh) = self
            .runtime
            .block_on(self.fs.create(
                self.dir_ino,
                name.as_bytes(),
                0o644,
                libc::O_WRONLY | libc::O_EXCL,
                &self.cred,
            ))
            .map_err(|e| nfs_err(&format!("create {name}"), e))?;
        Ok(NfsBenchFile { handle: self.runtime.handle().clone(), fs: self.fs.clone(), fh, offset: 0 })
    }

    fn remove(&self, name: &str) -> Result<(), BenchError> {
        self.runtime
            .block_on(self.fs.unlink(self.dir_ino, name.as_bytes(), &self.cred))
            .map_err(|e| nfs_err(&format!("remove {name}"), e))
    }
}
