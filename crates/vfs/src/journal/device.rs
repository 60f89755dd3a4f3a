//! Where the journal lives: the [`LogDevice`] trait and its implementation for a file or block
//! device.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Where the journal lives: a file or block device, or (in tests) something
/// that can lose what was not synced.
pub trait LogDevice: Send + Sync + 'static {
    /// Read exactly `buf.len()` bytes at `offset` (zeros past the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Make everything written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Current size in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Make the device at least `len` bytes long, the new part written (zeros),
    /// so later syncs need no allocation.
    fn grow(&self, len: u64) -> io::Result<()>;
}

impl LogDevice for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match FileExt::read_at(self, &mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    return Ok(());
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }

    fn size(&self) -> io::Result<u64> {
        let meta = self.metadata()?;
        if std::os::unix::fs::FileTypeExt::is_block_device(&meta.file_type()) {
            // A block device: its size is where a seek to the end lands.
            use std::io::Seek;
            let mut f = self;
            return f.seek(io::SeekFrom::End(0));
        }
        Ok(meta.len())
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        let have = LogDevice::size(self)?;
        if have >= len {
            return Ok(());
        }
        let zeros = vec![0u8; 1 << 20];
        let mut at = have;
        while at < len {
            let n = ((len - at) as usize).min(zeros.len());
            self.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.sync_all()
    }
}
