//! [`DiskCache`]: the persistent local-disk cache (`cache=DIR`), in the
//! style of Solaris CacheFS and Linux FS-Cache.
//!
//! Files are cached in [`CHUNK_BYTES`] chunks, one local file per chunk:
//! `DIR/<fileid>-<handle hash>/<chunk index>`. Each chunk file starts with
//! a fixed header holding the validator of the server file the chunk was
//! read from (mtime, ctime, size), the data length, an end-of-file flag and
//! a checksum of the data. A chunk is used only if its validator equals the
//! file's current one (so a client restart followed by an unchanged
//! GETATTR serves reads from disk), and anything short, corrupt or foreign
//! is a miss and is removed. Chunks are written to a temporary name and
//! renamed into place, so a crash leaves the old chunk or none.
//!
//! The cache keeps an in-memory index (built by scanning `DIR` at start,
//! oldest modification first) to bound its size: beyond the bound the
//! least recently used chunks are deleted.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use parking_lot::Mutex;

use super::config::CHUNK_BYTES;
use super::validator::Validator;

const MAGIC: &[u8; 8] = b"ENFSCHK1";
/// magic, mtime (8), ctime (8), size (8), data length (4), flags (4), checksum (8).
const HEADER_LEN: usize = 8 + 8 + 8 + 8 + 4 + 4 + 8;
const FLAG_EOF: u32 = 1;

/// One chunk's place in the index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ChunkKey {
    /// The per-file directory name.
    file: String,
    /// Chunk index within the file.
    index: u64,
}

struct Index {
    /// Key → (last-use tick, bytes on disk).
    entries: HashMap<ChunkKey, (u64, u64)>,
    /// Last-use tick → key: the LRU order.
    lru: BTreeMap<u64, ChunkKey>,
    /// Bytes of all chunk files.
    total: u64,
    /// Monotonic use counter.
    tick: u64,
}

impl Index {
    fn touch(&mut self, key: &ChunkKey, size: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((old_tick, old_size)) = self.entries.insert(key.clone(), (tick, size)) {
            self.lru.remove(&old_tick);
            self.total -= old_size;
        }
        self.lru.insert(tick, key.clone());
        self.total += size;
    }

    fn remove(&mut self, key: &ChunkKey) {
        if let Some((tick, size)) = self.entries.remove(key) {
            self.lru.remove(&tick);
            self.total -= size;
        }
    }
}

/// A bounded on-disk chunk store. All methods do blocking file I/O: call
/// them from `spawn_blocking`.
pub(crate) struct DiskCache {
    dir: PathBuf,
    bytes_max: u64,
    index: Mutex<Index>,
    /// Makes temporary names unique within this process.
    tmp_counter: std::sync::atomic::AtomicU64,
}

/// FNV-1a, 64 bit: a stable hash (std's `DefaultHasher` may change between
/// Rust releases, and these names must survive an upgrade).
pub(crate) fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The per-file directory name for a server file.
pub(crate) fn file_key(fileid: u64, fh: &[u8]) -> String {
    format!("{fileid:016x}-{:016x}", fnv64(fh))
}

impl DiskCache {
    /// Open (creating if needed) the cache in `dir`, indexing what is there.
    pub(crate) fn open(dir: &Path, bytes_max: u64) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut found: Vec<(std::time::SystemTime, ChunkKey, u64)> = Vec::new();
        for f in fs::read_dir(dir)? {
            let f = f?;
            if !f.file_type()?.is_dir() {
                continue;
            }
            let file = f.file_name().to_string_lossy().into_owned();
            for c in fs::read_dir(f.path())? {
                let c = c?;
                let name = c.file_name().to_string_lossy().into_owned();
                let meta = c.metadata()?;
                match name.parse::<u64>() {
                    Ok(index) if meta.is_file() => {
                        let when = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                        found.push((when, ChunkKey { file: file.clone(), index }, meta.len()));
                    }
                    // A temporary file left by a crash, or junk.
                    _ => {
                        let _ = fs::remove_file(c.path());
                    }
                }
            }
        }
        found.sort_by_key(|(when, _, _)| *when);
        let mut index = Index { entries: HashMap::new(), lru: BTreeMap::new(), total: 0, tick: 0 };
        for (_, key, size) in found {
            index.touch(&key, size);
        }
        let cache = DiskCache {
            dir: dir.to_path_buf(),
            bytes_max,
            index: Mutex::new(index),
            tmp_counter: std::sync::atomic::AtomicU64::new(0),
        };
        cache.cull();
        Ok(cache)
    }

    fn path(&self, key: &ChunkKey) -> PathBuf {
        self.dir.join(&key.file).join(key.index.to_string())
    }

    /// The chunk's bytes and end-of-file flag, if the disk holds a sound
    /// copy read when the file had validator `v`.
    pub(crate) fn load(&self, file: &str, index: u64, v: &Validator) -> Option<(Bytes, bool)> {
        let key = ChunkKey { file: file.to_string(), index };
        if !self.index.lock().entries.contains_key(&key) {
            return None;
        }
        let path = self.path(&key);
        match read_chunk(&path) {
            Some((hv, data, eof)) if hv == *v => {
                let mut idx = self.index.lock();
                idx.touch(&key, (HEADER_LEN + data.len()) as u64);
                Some((data, eof))
            }
            // Stale (the file changed on the server) or unreadable: remove it.
            _ => {
                let _ = fs::remove_file(&path);
                self.index.lock().remove(&key);
                None
            }
        }
    }

    /// Store a chunk read when the file had validator `v`.
    pub(crate) fn store(&self, file: &str, index: u64, v: &Validator, data: &[u8], eof: bool) {
        debug_assert!(data.len() as u64 <= CHUNK_BYTES);
        let key = ChunkKey { file: file.to_string(), index };
        let dir = self.dir.join(file);
        let n = self.tmp_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".tmp-{}-{n}", std::process::id()));
        let result = (|| -> io::Result<()> {
            fs::create_dir_all(&dir)?;
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&encode_header(v, data, eof))?;
            f.write_all(data)?;
            drop(f);
            fs::rename(&tmp, self.path(&key))
        })();
        match result {
            Ok(()) => {
                self.index.lock().touch(&key, (HEADER_LEN + data.len()) as u64);
                self.cull();
            }
            Err(e) => {
                // A full or failing cache disk only costs us caching.
                tracing::debug!("disk cache store failed: {e}");
                let _ = fs::remove_file(&tmp);
            }
        }
    }

    /// Delete least recently used chunks until the cache is within bound.
    fn cull(&self) {
        loop {
            let victim = {
                let mut idx = self.index.lock();
                if idx.total <= self.bytes_max {
                    return;
                }
                let Some((_, key)) = idx.lru.iter().next().map(|(t, k)| (*t, k.clone())) else {
                    return;
                };
                idx.remove(&key);
                key
            };
            let _ = fs::remove_file(self.path(&victim));
        }
    }

    /// Bytes currently held.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.index.lock().total
    }
}

fn encode_header(v: &Validator, data: &[u8], eof: bool) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&v.mtime.seconds.to_be_bytes());
    h.extend_from_slice(&v.mtime.nseconds.to_be_bytes());
    h.extend_from_slice(&v.ctime.seconds.to_be_bytes());
    h.extend_from_slice(&v.ctime.nseconds.to_be_bytes());
    h.extend_from_slice(&v.size.to_be_bytes());
    h.extend_from_slice(&(data.len() as u32).to_be_bytes());
    h.extend_from_slice(&(if eof { FLAG_EOF } else { 0 }).to_be_bytes());
    h.extend_from_slice(&fnv64(data).to_be_bytes());
    debug_assert_eq!(h.len(), HEADER_LEN);
    h
}

/// Read and check a chunk file: `None` for anything short, foreign or corrupt.
fn read_chunk(path: &Path) -> Option<(Validator, Bytes, bool)> {
    let mut f = fs::File::open(path).ok()?;
    let mut h = [0u8; HEADER_LEN];
    f.read_exact(&mut h).ok()?;
    if &h[..8] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_be_bytes(h[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes"));
    let v = Validator {
        mtime: eagernfs_proto::nfs3::Nfstime3 { seconds: u32_at(8), nseconds: u32_at(12) },
        ctime: eagernfs_proto::nfs3::Nfstime3 { seconds: u32_at(16), nseconds: u32_at(20) },
        size: u64_at(24),
    };
    let len = u32_at(32) as u64;
    // Bound the length before allocating: a chunk is never larger.
    if len > CHUNK_BYTES {
        return None;
    }
    let eof = u32_at(36) & FLAG_EOF != 0;
    let sum = u64_at(40);
    let mut data = vec![0u8; len as usize];
    f.read_exact(&mut data).ok()?;
    // Trailing bytes mean the file is not what we wrote.
    if f.read(&mut [0u8; 1]).ok()? != 0 {
        return None;
    }
    if fnv64(&data) != sum {
        return None;
    }
    Some((v, Bytes::from(data), eof))
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_proto::nfs3::Nfstime3;

    fn v(n: u32) -> Validator {
        Validator {
            mtime: Nfstime3 { seconds: n, nseconds: 0 },
            ctime: Nfstime3 { seconds: n, nseconds: 1 },
            size: 7,
        }
    }

    #[test]
    fn round_trip_validate_and_reopen() {
        let d = tempfile::tempdir().unwrap();
        let c = DiskCache::open(d.path(), 1 << 20).unwrap();
        c.store("f", 3, &v(1), b"hello", true);
        assert_eq!(c.load("f", 3, &v(1)), Some((Bytes::from_static(b"hello"), true)));
        assert_eq!(c.load("f", 3, &v(2)), None, "a changed validator is a miss");
        assert_eq!(c.load("f", 3, &v(1)), None, "and the stale chunk is gone");
        c.store("f", 4, &v(1), b"again", false);
        drop(c);
        let c = DiskCache::open(d.path(), 1 << 20).unwrap();
        assert_eq!(c.load("f", 4, &v(1)), Some((Bytes::from_static(b"again"), false)));
    }

    #[test]
    fn corrupt_and_truncated_chunks_are_misses() {
        let d = tempfile::tempdir().unwrap();
        let c = DiskCache::open(d.path(), 1 << 20).unwrap();
        c.store("f", 0, &v(1), &[5u8; 1000], false);
        c.store("f", 1, &v(1), &[6u8; 1000], false);
        let p0 = d.path().join("f").join("0");
        let len = fs::metadata(&p0).unwrap().len();
        fs::OpenOptions::new().write(true).open(&p0).unwrap().set_len(len - 10).unwrap();
        let p1 = d.path().join("f").join("1");
        let mut b = fs::read(&p1).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        fs::write(&p1, b).unwrap();
        assert_eq!(c.load("f", 0, &v(1)), None);
        assert_eq!(c.load("f", 1, &v(1)), None);
    }

    #[test]
    fn culls_least_recently_used() {
        let d = tempfile::tempdir().unwrap();
        let one = (HEADER_LEN + 100) as u64;
        let c = DiskCache::open(d.path(), 3 * one).unwrap();
        for i in 0..3 {
            c.store("f", i, &v(1), &[1u8; 100], false);
        }
        assert!(c.load("f", 0, &v(1)).is_some()); // 0 is now the most recent
        c.store("f", 3, &v(1), &[1u8; 100], false);
        assert!(c.bytes() <= 3 * one);
        assert!(c.load("f", 1, &v(1)).is_none(), "least recently used chunk culled");
        assert!(c.load("f", 0, &v(1)).is_some());
        assert!(c.load("f", 3, &v(1)).is_some());
    }
}
