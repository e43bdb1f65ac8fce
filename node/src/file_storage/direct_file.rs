//! A file appended with O_DIRECT (Linux): appends collect in a block-aligned tail buffer
//! and go to disk as whole blocks, so writes bypass the page cache and its writeback
//! (which on many VMs is far slower than the device). The partial last block is written
//! padded, then the file is cut back to its logical length, at sync (and on drop).
//! Reads of the unwritten tail are served from memory. Used by
//! [`super::FileStorage::with_direct_io`]; semantics match the buffered path: appends
//! are volatile until `sync`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Alignment and size unit of direct writes (covers 512-byte and 4 KiB devices).
pub(crate) const BLOCK: usize = 4096;
/// Whole blocks are written once this much is buffered.
const WRITE_CHUNK: usize = 1 << 20;

#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Block([u8; BLOCK]);

/// A growable byte buffer whose start is BLOCK-aligned.
struct AlignedBuf {
    blocks: Vec<Block>,
    len: usize,
}

impl AlignedBuf {
    fn new() -> Self {
        Self {
            blocks: Vec::new(),
            len: 0,
        }
    }
    /// All capacity as bytes (len rounded up to whole blocks, at least).
    fn raw(&self) -> &[u8] {
        // SAFETY: `Block` is a repr(C) array of u8 with no padding, and a Vec's elements
        // are contiguous, so the blocks are `blocks.len() * BLOCK` initialised bytes.
        unsafe {
            std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.blocks.len() * BLOCK)
        }
    }
    fn raw_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `raw`, and `&mut self` gives exclusive access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.blocks.as_mut_ptr().cast::<u8>(),
                self.blocks.len() * BLOCK,
            )
        }
    }
    fn bytes(&self) -> &[u8] {
        &self.raw()[..self.len]
    }
    fn reserve_blocks(&mut self, bytes: usize) {
        let need = bytes.div_ceil(BLOCK).max(1);
        if self.blocks.len() < need {
            self.blocks.resize(need, Block([0; BLOCK]));
        }
    }
    fn extend(&mut self, data: &[u8]) {
        let end = self.len + data.len();
        self.reserve_blocks(end);
        let len = self.len;
        self.raw_mut()[len..end].copy_from_slice(data);
        self.len = end;
    }
    /// Drops the first `n` whole blocks, moving the rest to the front.
    fn consume_blocks(&mut self, n: usize) {
        let cut = n * BLOCK;
        let len = self.len;
        self.raw_mut().copy_within(cut..len, 0);
        self.len -= cut;
    }
}

pub(crate) struct DirectFile {
    write: File,
    read: File,
    /// Bytes `[0, disk_len)` are on disk as whole blocks; `disk_len % BLOCK == 0`.
    disk_len: u64,
    /// Logical bytes from `disk_len` on, not yet written (or rewritten at each sync).
    tail: AlignedBuf,
}

impl DirectFile {
    /// Opens `path` for direct appends (creating it if `create`). Fails with
    /// `InvalidInput` where O_DIRECT is unsupported (e.g. tmpfs); callers fall back.
    pub fn open(path: &Path, create: bool) -> io::Result<Self> {
        let write = OpenOptions::new()
            .write(true)
            .create(create)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        let read = File::open(path)?;
        let size = read.metadata()?.len();
        let disk_len = size / BLOCK as u64 * BLOCK as u64;
        let mut tail = AlignedBuf::new();
        let mut rest = vec![0u8; (size - disk_len) as usize];
        read.read_exact_at(&mut rest, disk_len)?;
        tail.extend(&rest);
        Ok(Self {
            write,
            read,
            disk_len,
            tail,
        })
    }

    pub fn len(&self) -> u64 {
        self.disk_len + self.tail.len as u64
    }

    pub fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.tail.extend(data);
        if self.tail.len >= WRITE_CHUNK {
            self.write_full_blocks()?;
        }
        Ok(())
    }

    fn write_full_blocks(&mut self) -> io::Result<()> {
        let n = self.tail.len / BLOCK;
        if n > 0 {
            self.write
                .write_all_at(&self.tail.raw()[..n * BLOCK], self.disk_len)?;
            self.disk_len += (n * BLOCK) as u64;
            self.tail.consume_blocks(n);
        }
        Ok(())
    }

    /// Puts every logical byte in the file (not synced): whole blocks, then the partial
    /// block zero-padded, then cuts the file to its logical length.
    fn write_out(&mut self) -> io::Result<()> {
        self.write_full_blocks()?;
        let r = self.tail.len;
        if r > 0 {
            let buf = self.tail.raw_mut();
            buf[r..BLOCK].fill(0);
            self.write.write_all_at(&buf[..BLOCK], self.disk_len)?;
        }
        let logical = self.len();
        if self.write.metadata()?.len() != logical {
            self.write.set_len(logical)?;
        }
        Ok(())
    }

    pub fn sync(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.write.sync_data()
    }

    pub fn read_at(&mut self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        let logical = self.len();
        if pos >= logical {
            return Ok(0);
        }
        let n = buf.len().min((logical - pos) as usize);
        let mut done = 0;
        if pos < self.disk_len {
            let k = n.min((self.disk_len - pos) as usize);
            self.read.read_exact_at(&mut buf[..k], pos)?;
            done = k;
        }
        if done < n {
            let off = (pos + done as u64 - self.disk_len) as usize;
            buf[done..n].copy_from_slice(&self.tail.bytes()[off..off + n - done]);
        }
        Ok(n)
    }

    /// Cuts to `len` (no-op if shorter), durably.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        if len >= self.len() {
            return self.sync();
        }
        if len >= self.disk_len {
            self.tail.len = (len - self.disk_len) as usize;
        } else {
            self.write.set_len(len)?;
            let start = len / BLOCK as u64 * BLOCK as u64;
            let mut rest = vec![0u8; (len - start) as usize];
            self.read.read_exact_at(&mut rest, start)?;
            self.disk_len = start;
            self.tail.len = 0;
            self.tail.extend(&rest);
        }
        self.write_out()?;
        self.write.sync_all()
    }
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        // Like a buffered file's page cache: unsynced bytes reach the file, not the disk.
        let _ = self.write_out();
    }
}
