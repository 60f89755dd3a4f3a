//! The file set the load generator works on: `DIR/d<i>/f<j>` (M directories × K files of a
//! fixed size, plus a symbolic link `link -> f0` per directory for READLINK) and one private
//! directory `DIR/client-<n>` per virtual client for its CREATEs and REMOVEs, so clients never
//! race for the same names.
//!
//! Preparing reuses whatever is already there: a file of the right size is left alone, so a
//! second run against the same server starts at once (and measures a warm server, which the
//! report cannot know: start from a fresh export to measure a cold one).

use crate::load::clients::error_kind;
use bytes::Bytes;
use eagernfs_client::{Cred, NfsClient, NfsError, NfsOps};
use eagernfs_proto::nfs3::{Createhow3, Fattr3, Ftype3, NfsFh3, Sattr3, StableHow};
use serde::{Deserialize, Serialize};

/// Shape of the file set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSetShape {
    /// Name of the file-set directory, created under the URL's directory.
    pub dir_name: String,
    /// Directories (M).
    pub dirs: u32,
    /// Files per directory (K).
    pub files_per_dir: u32,
    /// Size of every file.
    pub file_size_bytes: u64,
}

impl Default for FileSetShape {
    fn default() -> Self {
        Self { dir_name: "eagernfs-load".into(), dirs: 10, files_per_dir: 25, file_size_bytes: 64 * 1024 }
    }
}

/// Upper bounds that keep a typo from filling a server.
pub const FILES_MAX: u64 = 1_000_000;
/// Largest file in a file set.
pub const FILE_SIZE_MAX: u64 = 1 << 30;

impl FileSetShape {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), String> {
        if self.dirs == 0 || self.files_per_dir == 0 {
            return Err("the file set needs at least one directory with one file".into());
        }
        if u64::from(self.dirs) * u64::from(self.files_per_dir) > FILES_MAX {
            return Err(format!("at most {FILES_MAX} files in the file set"));
        }
        if self.file_size_bytes == 0 || self.file_size_bytes > FILE_SIZE_MAX {
            return Err(format!("file size must be 1 byte to {FILE_SIZE_MAX} bytes"));
        }
        if self.dir_name.is_empty() || self.dir_name.contains('/') || self.dir_name == ".." {
            return Err(format!("{:?} is not a directory name", self.dir_name));
        }
        Ok(())
    }
}

/// One directory of the file set, by handle.
#[derive(Debug, Clone)]
pub struct SetDir {
    /// The directory.
    pub fh: NfsFh3,
    /// Its files `f0`, `f1`, ... in order.
    pub files: Vec<NfsFh3>,
    /// The symbolic link `link`.
    pub link: NfsFh3,
}

/// The prepared file set.
#[derive(Debug, Clone)]
pub struct FileSet {
    /// The file-set directory.
    pub root: NfsFh3,
    /// Its directories.
    pub dirs: Vec<SetDir>,
    /// Files created (or grown) while preparing; 0 when everything was reused.
    pub files_written: u64,
}

/// A failed preparation step, as a sentence.
fn step(what: &str, e: NfsError) -> String {
    format!("preparing the file set: {what}: {}", error_kind(&e))
}

/// Finds `name` in `dir`, or creates it as a directory.
pub(crate) async fn ensure_dir(
    c: &NfsClient,
    cred: &Cred,
    dir: &NfsFh3,
    name: &str,
) -> Result<NfsFh3, String> {
    match c.lookup(cred, dir, name.as_bytes()).await {
        Ok(found) => Ok(found.object),
        Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)) => {
            let attrs = Sattr3 { mode: Some(0o755), ..Default::default() };
            match c.mkdir(cred, dir, name.as_bytes(), attrs).await {
                Ok(made) => made.obj.ok_or_else(|| format!("MKDIR {name} returned no handle")),
                // Another client made it meanwhile.
                Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Exist)) => c
                    .lookup(cred, dir, name.as_bytes())
                    .await
                    .map(|f| f.object)
                    .map_err(|e| step(&format!("LOOKUP {name}"), e)),
                Err(e) => Err(step(&format!("MKDIR {name}"), e)),
            }
        }
        Err(e) => Err(step(&format!("LOOKUP {name}"), e)),
    }
}

async fn attrs_of(
    c: &NfsClient,
    cred: &Cred,
    fh: &NfsFh3,
    post_op: Option<Fattr3>,
) -> Result<Fattr3, NfsError> {
    match post_op {
        Some(a) => Ok(a),
        None => c.getattr(cred, fh).await,
    }
}

/// Fills `fh` to `size` bytes (from its current size), UNSTABLE then one COMMIT.
async fn fill(c: &NfsClient, cred: &Cred, fh: &NfsFh3, from: u64, size: u64) -> Result<(), NfsError> {
    let chunk = u64::from(c.wsize()).clamp(4096, 1 << 20);
    let data = Bytes::from(vec![0x5a; chunk as usize]);
    let mut offset = from;
    while offset < size {
        let n = (size - offset).min(chunk) as usize;
        c.write(cred, fh, offset, data.slice(..n), StableHow::Unstable).await?;
        offset += n as u64;
    }
    c.commit(cred, fh, 0, 0).await?;
    Ok(())
}

/// Creates (or reuses) the file set under `base`.
pub async fn prepare(
    c: &NfsClient,
    cred: &Cred,
    base: &NfsFh3,
    shape: &FileSetShape,
) -> Result<FileSet, String> {
    let root = ensure_dir(c, cred, base, &shape.dir_name).await?;
    let mut dirs = Vec::with_capacity(shape.dirs as usize);
    let mut files_written = 0;
    for d in 0..shape.dirs {
        let dir = ensure_dir(c, cred, &root, &format!("d{d}")).await?;
        let mut files = Vec::with_capacity(shape.files_per_dir as usize);
        for f in 0..shape.files_per_dir {
            let name = format!("f{f}");
            let (fh, attrs) = match c.lookup(cred, &dir, name.as_bytes()).await {
                Ok(found) => {
                    let a = attrs_of(c, cred, &found.object, found.obj_attributes)
                        .await
                        .map_err(|e| step(&format!("GETATTR d{d}/{name}"), e))?;
                    (found.object, a)
                }
                Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)) => {
                    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
                    let made = c
                        .create(cred, &dir, name.as_bytes(), how)
                        .await
                        .map_err(|e| step(&format!("CREATE d{d}/{name}"), e))?;
                    let fh = made.obj.ok_or_else(|| format!("CREATE d{d}/{name} returned no handle"))?;
                    let a = attrs_of(c, cred, &fh, made.obj_attributes)
                        .await
                        .map_err(|e| step(&format!("GETATTR d{d}/{name}"), e))?;
                    (fh, a)
                }
                Err(e) => return Err(step(&format!("LOOKUP d{d}/{name}"), e)),
            };
            if attrs.ftype != Ftype3::Reg {
                return Err(format!("preparing the file set: d{d}/{name} exists and is not a regular file"));
            }
            if attrs.size < shape.file_size_bytes {
                fill(c, cred, &fh, attrs.size, shape.file_size_bytes)
                    .await
                    .map_err(|e| step(&format!("WRITE d{d}/{name}"), e))?;
                files_written += 1;
            }
            files.push(fh);
        }
        let link = match c.lookup(cred, &dir, b"link").await {
            Ok(found) => found.object,
            Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)) => c
                .symlink(cred, &dir, b"link", b"f0", Sattr3::default())
                .await
                .map_err(|e| step(&format!("SYMLINK d{d}/link"), e))?
                .obj
                .ok_or_else(|| format!("SYMLINK d{d}/link returned no handle"))?,
            Err(e) => return Err(step(&format!("LOOKUP d{d}/link"), e)),
        };
        dirs.push(SetDir { fh: dir, files, link });
    }
    Ok(FileSet { root, dirs, files_written })
}
