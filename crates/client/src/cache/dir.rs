//! Directory reading: READDIRPLUS (falling back to READDIR for good when
//! a server answers NOTSUPP), with offsets FUSE can hand back.
//!
//! An entry's `offset` is the NFS cookie of that entry: FUSE passes the
//! offset of the last entry it used to the next `readdir`, which is the
//! cookie to continue after. The handle keeps the last page, so the
//! entries that did not fit in FUSE's buffer are served again without a
//! call; a read from offset 0 (a rewind) always goes to the server, or is
//! served the listing kept from the last whole read once a GETATTR shows
//! the directory unchanged (close-to-open, unless `nocto`). READDIRPLUS
//! results fill the attribute and lookup caches, so a following `ls -l`
//! needs no LOOKUPs or GETATTRs.
//!
//! A program that reads a directory from its start is likely walking a
//! tree (`find`, `rm -r`, `cp -r`, `du`): where the server grants
//! delegations of directories (NFSv4.1), the listings of the
//! subdirectories it lists are read ahead in the background, each under a
//! delegation asked for in the same round trip, so the program's reads of
//! them ask nothing. A read of a directory being read ahead waits for that
//! READDIR instead of sending its own.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use eagernfs_proto::nfs3::{Cookieverf3, Ftype3, Nfsstat3, Readdirplus3ResOk};
use futures::StreamExt;

use super::ahead::Listed;
use super::dirent::DirEntry;
use super::fs::{CachedFs, DirHandle, Shared};
use super::inode::{Dentry, Inode, ListingAhead, ROOT_INO};
use super::{FsError, FsResult};
use crate::ops::{Cred, NfsError, NfsOps};
use crate::options::LookupCache;

impl<C: NfsOps> CachedFs<C> {
    /// Open directory `ino` for reading. Returns a directory handle id.
    pub async fn opendir(&self, ino: u64, cred: &Cred) -> FsResult<u64> {
        let s = self.shared();
        s.early.settle_ino(ino).await;
        let inode = s.inode(ino)?;
        if !inode.is_dir() {
            return Err(NfsError::Nfs(Nfsstat3::Notdir).into());
        }
        s.revalidate(&inode, cred).await?;
        let id = s.next_handle.fetch_add(1, Ordering::Relaxed);
        let h = DirHandle {
            inode,
            cred: cred.clone(),
            verf: [0; 8],
            page: Vec::new(),
            page_after: 0,
            eof: false,
        };
        s.dir_handles.lock().insert(id, Arc::new(tokio::sync::Mutex::new(h)));
        Ok(id)
    }

    /// Entries after `offset` (0: from the start); an empty result means
    /// the end. Returns one server page at most: FUSE adds what fits and
    /// calls again with the offset of the last entry it used.
    pub async fn readdir(&self, dh: u64, offset: u64) -> FsResult<Vec<DirEntry>> {
        let s = self.shared();
        let h = s.dir_handles.lock().get(&dh).cloned().ok_or(FsError::BadHandle(dh))?;
        let mut h = h.lock().await;
        // Names created early are listed once their files are made.
        s.early.settle_parent(h.inode.ino).await;
        // Offset 0 is a fresh start (opendir, or rewinddir(3)): read the
        // directory as it is now, not the page kept from before, which may
        // list names since removed or miss names since made.
        if !h.page.is_empty() && offset != 0 {
            if offset == h.page_after {
                return Ok(h.page.clone());
            }
            if let Some(pos) = h.page.iter().position(|e| e.offset == offset) {
                let rest = h.page[pos + 1..].to_vec();
                if !rest.is_empty() || h.eof {
                    return Ok(rest);
                }
            }
        }
        if offset == 0 {
            // Its listing being read ahead: that READDIR is this one's.
            s.wait_listing_ahead(&h.inode).await;
            // A delegation of the directory vouches for the listing kept:
            // no other client can change the directory without its recall.
            let listing_kept = h.inode.state.lock().listing.is_some();
            let delegated = listing_kept && s.delegated(&h.inode);
            if s.cfg.cto && !delegated && listing_kept {
                // Close-to-open holds for directories too (as in Linux's NFS
                // client, whose open of a directory revalidates it): a
                // listing kept from before another client changed the
                // directory is not served to a new read (one that missed the
                // names another mount made since made `rm -rf` fail with
                // ENOTEMPTY). New attributes that differ drop the listing.
                // Only when there is a listing to vouch for: a READDIR
                // brings the directory's attributes anyway, and an open
                // that never reads costs nothing (asked at the open, `find`
                // paid one GETATTR more per directory with subdirectories:
                // fts opens those again without reading them). A directory
                // another client removed fails this read with ESTALE; the
                // cache then forgets it (`CachedFs::forget_stale`), so the
                // next open finds ENOENT.
                s.check_listing(&h.inode, &h.cred).await?;
            }
            // The listing kept from the last read, while the directory's
            // attributes are trusted and nothing of ours changed it.
            let kept = {
                let st = h.inode.state.lock();
                let now = tokio::time::Instant::now();
                st.listing.clone().filter(|_| st.attr_valid(now) || st.vouched(delegated))
            };
            if let Some(l) = kept {
                h.page = (*l).clone();
                h.page_after = 0;
                h.eof = true;
                s.listing_read(&h.inode, true);
                s.list_ahead(&h.inode, &h.page, &h.cred);
                return Ok(h.page.clone());
            }
        }
        s.fetch_dir_page(&mut h, offset).await?;
        if offset == 0 {
            s.listing_read(&h.inode, false);
            if h.eof {
                s.list_ahead(&h.inode, &h.page, &h.cred);
            }
        }
        Ok(h.page.clone())
    }

    /// Close a directory handle.
    pub fn releasedir(&self, dh: u64) -> FsResult<()> {
        self.shared().dir_handles.lock().remove(&dh).map(|_| ()).ok_or(FsError::BadHandle(dh))
    }
}

impl<C: NfsOps> Shared<C> {
    /// A GETATTR of directory `dir`, whose listing is kept: attributes that
    /// differ from the cached ones drop the listing.
    async fn check_listing(&self, dir: &Inode, cred: &Cred) -> FsResult<()> {
        self.counters.attr_misses.fetch_add(1, Ordering::Relaxed);
        self.settle_dir(dir).await;
        let gen = self.clock.tick();
        let a = self.client.getattr_listed_dir(cred, &dir.fh).await?;
        self.fresh_attrs(dir, a, gen, true);
        Ok(())
    }

    async fn fetch_dir_page(&self, h: &mut DirHandle, cookie: u64) -> FsResult<()> {
        let listing_gen = h.inode.state.lock().listing_gen;
        self.fetch_dir_page_inner(h, cookie).await?;
        if cookie == 0 && h.eof {
            let mut st = h.inode.state.lock();
            if st.listing_gen == listing_gen && st.changes_in_flight == 0 {
                st.listing = Some(Arc::new(h.page.clone()));
            }
        }
        Ok(())
    }

    async fn fetch_dir_page_inner(&self, h: &mut DirHandle, cookie: u64) -> FsResult<()> {
        let verf = if cookie == 0 { [0; 8] } else { h.verf };
        let dir = h.inode.clone();
        self.settle_dir(&dir).await;
        let count = self.cfg.readdir_bytes;
        if self.readdirplus.load(Ordering::Relaxed) {
            // dircount bounds the names, maxcount the whole reply with
            // attributes and handles.
            let gen = self.clock.tick();
            match self.client.readdirplus(&h.cred, &dir.fh, cookie, verf, count / 4, count).await {
                Ok(r) => {
                    (h.page, h.verf, h.eof) = self.plus_page(&dir, r, gen);
                    h.page_after = cookie;
                    return Ok(());
                }
                Err(NfsError::Nfs(Nfsstat3::Notsupp)) => {
                    self.readdirplus.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let gen = self.clock.tick();
        let r = self.client.readdir(&h.cred, &dir.fh, cookie, verf, count).await?;
        if let Some(a) = r.dir_attributes {
            self.fresh_attrs(&dir, a, gen, false);
        }
        h.verf = r.cookieverf;
        h.page = r
            .reply
            .entries
            .into_iter()
            .map(|e| DirEntry {
                ino: self.ino_for(&dir, &e.name.0, e.fileid),
                name: e.name.0,
                kind: None,
                offset: e.cookie,
                attr: None,
            })
            .collect();
        h.page_after = cookie;
        h.eof = r.reply.eof;
        Ok(())
    }

    /// A READDIRPLUS page of `dir` (asked at clock tick `gen`) as FUSE's
    /// entries, its cookie verifier and whether it ends the listing; the
    /// attribute and lookup caches learn what it lists.
    fn plus_page(&self, dir: &Inode, r: Readdirplus3ResOk, gen: u64) -> (Vec<DirEntry>, Cookieverf3, bool) {
        if let Some(a) = r.dir_attributes {
            self.fresh_attrs(dir, a, gen, false);
        }
        let mut page = Vec::with_capacity(r.reply.entries.len());
        // The regular files listed, with their places, for reading ahead
        // of a program opening them in order.
        let ahead = self.client.read_files_max() > 0;
        let mut files = Vec::new();
        for e in r.reply.entries {
            let name = e.name.0.clone();
            let dot = is_dot(&name);
            let (ino, attr) = match (&e.name_handle, &e.name_attributes) {
                (Some(fh), Some(a)) if !dot => {
                    let child = self.intern(fh, a, gen);
                    if ahead && child.ftype == Ftype3::Reg {
                        files.push((child.clone(), page.len() as u32));
                    }
                    if self.cfg.lookupcache != LookupCache::None {
                        self.remember_name(dir, name.clone(), Dentry::Positive(fh.clone()));
                    }
                    let attr = child.state.lock().visible_attr();
                    (child.ino, Some(attr))
                }
                _ => (self.ino_for(dir, &name, e.fileid), e.name_attributes),
            };
            page.push(DirEntry { ino, kind: attr.map(|a| a.ftype), name, offset: e.cookie, attr });
        }
        if let Some(&(_, first_file)) = files.first() {
            let inos: Arc<[u64]> = page.iter().map(|e| e.ino).collect();
            for (child, index) in files {
                child.state.lock().listed = Some(Listed { page: inos.clone(), index, first_file });
            }
        }
        (page, r.cookieverf, r.reply.eof)
    }

    /// Wait while the listing of `dir` is being read ahead.
    async fn wait_listing_ahead(&self, dir: &Inode) {
        loop {
            let done = self.listings_ahead_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if dir.state.lock().listing_ahead != ListingAhead::Reading {
                return;
            }
            done.await;
        }
    }

    /// A program read the listing of `dir` from its start: `kept`, from
    /// the listing kept (with no call), else from the server. Counts a
    /// listing read ahead that it used.
    fn listing_read(&self, dir: &Inode, kept: bool) {
        let was = std::mem::replace(&mut dir.state.lock().listing_ahead, ListingAhead::No);
        if was == ListingAhead::Kept && kept {
            self.counters.listings_read_ahead_used.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A program read `page`, the whole listing of `dir`: read the listings
    /// of the subdirectories it lists ahead, in the background (see the
    /// module's comment), those not kept or being read already.
    fn list_ahead(self: &Arc<Self>, dir: &Inode, page: &[DirEntry], cred: &Cred) {
        if self.cfg.files_ahead_max == 0 || !self.client.lists_ahead() {
            return;
        }
        // A server that refused the last few: only once it delegates a
        // directory again (this one, at its close-to-open check).
        if self.listings_refused.load(Ordering::Relaxed) >= LISTINGS_REFUSED_MAX {
            if !self.delegated(dir) {
                return;
            }
            self.listings_refused.store(0, Ordering::Relaxed);
        }
        let parent_fileid = dir.state.lock().attr.fileid;
        let mut picked = Vec::new();
        for e in page {
            if picked.len() == LISTINGS_AHEAD_MAX {
                break;
            }
            if e.kind != Some(Ftype3::Dir) || is_dot(&e.name) {
                continue;
            }
            let Some(child) = self.inodes.get(e.ino) else { continue };
            let listing_gen = {
                let mut st = child.state.lock();
                if st.listing.is_some() || st.listing_ahead != ListingAhead::No {
                    continue;
                }
                st.listing_ahead = ListingAhead::Reading;
                st.listing_gen
            };
            picked.push((child, listing_gen));
        }
        if picked.is_empty() {
            return;
        }
        let (me, cred) = (self.clone(), cred.clone());
        // Unmount waits for it (its delegations are returned after).
        let counted = self.background.start();
        self.runtime.spawn(async move {
            let _counted = counted;
            futures::stream::iter(picked)
                .for_each_concurrent(LISTINGS_AHEAD_PARALLEL, |(child, listing_gen)| {
                    let (me, cred) = (&me, &cred);
                    async move { me.read_listing_ahead(&child, listing_gen, parent_fileid, cred).await }
                })
                .await;
        });
    }

    /// Read the listing of `dir` ahead and keep it if the server granted a
    /// delegation of `dir` with it and nothing of ours changed `dir` since
    /// the listing generation `listing_gen`.
    async fn read_listing_ahead(&self, dir: &Inode, listing_gen: u64, parent_fileid: u64, cred: &Cred) {
        self.settle_dir(dir).await;
        let count = self.cfg.readdir_bytes;
        let gen = self.clock.tick();
        let r = self.client.readdirplus_ahead(cred, &dir.fh, parent_fileid, count / 4, count).await;
        let page = match r {
            Ok(Some(r)) => {
                self.listings_refused.store(0, Ordering::Relaxed);
                Some(self.plus_page(dir, r, gen))
            }
            Ok(None) => {
                self.listings_refused.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(e) => {
                tracing::debug!("reading a directory's listing ahead: {e}");
                None
            }
        };
        let kept = {
            let mut st = dir.state.lock();
            let keep = match page {
                Some((page, _, true))
                    if st.listing_gen == listing_gen && st.changes_in_flight == 0 && st.listing.is_none() =>
                {
                    st.listing = Some(Arc::new(page));
                    true
                }
                _ => false,
            };
            st.listing_ahead = if keep { ListingAhead::Kept } else { ListingAhead::No };
            keep
        };
        if kept {
            self.counters.listings_read_ahead.fetch_add(1, Ordering::Relaxed);
        }
        self.listings_ahead_done.notify_waiters();
    }

    /// Best inode number for an entry we have no handle for.
    fn ino_for(&self, dir: &Inode, name: &[u8], fileid: u64) -> u64 {
        if name == b"." {
            return dir.ino;
        }
        let root_fileid = self.inodes.get(ROOT_INO).map(|r| r.state.lock().attr.fileid);
        if root_fileid == Some(fileid) {
            ROOT_INO
        } else {
            fileid
        }
    }
}

/// Subdirectories whose listings one listing read by a program reads ahead
/// at most.
const LISTINGS_AHEAD_MAX: usize = 32;
/// Listings read ahead at once, per listing read by a program.
const LISTINGS_AHEAD_PARALLEL: usize = 4;
/// Listings read ahead in a row with no delegation, after which none is
/// until the server delegates a directory again.
const LISTINGS_REFUSED_MAX: u32 = 8;

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}
