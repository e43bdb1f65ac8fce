//! The simulated disk of one node: `skein_core`'s [`MemStorage`] (which models what is and
//! is not synced, and takes fault hooks) plus latency accounting.
//!
//! The storage trait is synchronous, so latency cannot make a call wait. Instead every
//! append and fsync adds its cost to the node's pending I/O time; the world charges it after
//! the node's step: the node's outputs leave only once its I/O would have completed, and
//! the node handles nothing else meanwhile (a single-threaded process doing blocking I/O).
//! A slow-disk fault adds a fixed extra latency to every write and fsync.

use crate::config::DiskConfig;
use crate::rng::between;
use crate::time::SimTime;
use rand_chacha::ChaCha8Rng;
use skein_core::log::{Storage, StorageError};
use skein_core::testing::MemStorage;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

struct Meter {
    config: DiskConfig,
    /// I/O time accumulated since the last [`SimDisk::take_latency`].
    pending: Cell<SimTime>,
    /// Extra latency per write/fsync while a slow-disk fault lasts.
    slow: Cell<SimTime>,
    rng: RefCell<ChaCha8Rng>,
    appends: Cell<u64>,
    syncs: Cell<u64>,
    reads: Cell<u64>,
    read_bytes: Cell<u64>,
}

/// A node's disk: cheap to clone; every clone is the same disk.
#[derive(Clone)]
pub struct SimDisk {
    mem: MemStorage,
    meter: Rc<Meter>,
}

impl SimDisk {
    pub fn new(config: DiskConfig, rng: ChaCha8Rng) -> Self {
        Self {
            mem: MemStorage::new(),
            meter: Rc::new(Meter {
                config,
                pending: Cell::new(0),
                slow: Cell::new(0),
                rng: RefCell::new(rng),
                appends: Cell::new(0),
                syncs: Cell::new(0),
                reads: Cell::new(0),
                read_bytes: Cell::new(0),
            }),
        }
    }

    /// The underlying disk, for fault injection (crash, bit flips, read errors, capacity).
    pub fn mem(&self) -> &MemStorage {
        &self.mem
    }

    /// I/O time accumulated since the last call, and resets it.
    pub fn take_latency(&self) -> SimTime {
        self.meter.pending.replace(0)
    }

    /// Sets the slow-disk extra latency (0 = normal speed).
    pub fn set_slow(&self, extra: SimTime) {
        self.meter.slow.set(extra);
    }

    /// (appends, fsyncs) performed so far.
    pub fn op_counts(&self) -> (u64, u64) {
        (self.meter.appends.get(), self.meter.syncs.get())
    }

    /// (read calls, bytes read) so far: how much log the nodes re-read, a deterministic
    /// measure of read-path work (`skein sim bench` reports it per event).
    pub fn read_counts(&self) -> (u64, u64) {
        (self.meter.reads.get(), self.meter.read_bytes.get())
    }

    fn charge(&self, t: SimTime) {
        let m = &self.meter;
        m.pending.set(m.pending.get() + t + m.slow.get());
    }
}

impl Storage for SimDisk {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        self.mem.list(dir)
    }

    fn exists(&self, path: &str) -> bool {
        self.mem.exists(path)
    }

    fn len(&self, path: &str) -> Result<u64, StorageError> {
        self.mem.len(path)
    }

    fn generation(&self, path: &str) -> Option<u64> {
        self.mem.generation(path)
    }

    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        // Reads are served from the page cache: no latency charged.
        let n = self.mem.read_at(path, pos, buf)?;
        let m = &self.meter;
        m.reads.set(m.reads.get() + 1);
        m.read_bytes.set(m.read_bytes.get() + n as u64);
        Ok(n)
    }

    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        let c = &self.meter.config;
        self.meter.appends.set(self.meter.appends.get() + 1);
        self.charge(c.write_latency + c.write_latency_per_kib * (data.len() as u64).div_ceil(1024));
        self.mem.append(path, data)
    }

    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        let c = &self.meter.config;
        self.meter.syncs.set(self.meter.syncs.get() + 1);
        let t = between(&mut self.meter.rng.borrow_mut(), c.fsync_min, c.fsync_max);
        self.charge(t);
        self.mem.sync(path)
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        let t = self.meter.config.fsync_min;
        self.charge(t);
        self.mem.truncate(path, len)
    }

    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        self.mem.remove(path)
    }

    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        let c = &self.meter.config;
        let t =
            c.write_latency + between(&mut self.meter.rng.borrow_mut(), c.fsync_min, c.fsync_max);
        self.charge(t);
        self.mem.write_atomic(path, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Subsystem};

    #[test]
    fn charges_latency_and_keeps_mem_semantics() {
        let mut d = SimDisk::new(DiskConfig::default(), stream(1, Subsystem::Disk));
        d.append("a/x.log", b"hello").unwrap();
        let w = d.take_latency();
        assert!(w > 0);
        assert_eq!(d.take_latency(), 0);
        d.sync("a/x.log").unwrap();
        let s = d.take_latency();
        assert!((DiskConfig::default().fsync_min..=DiskConfig::default().fsync_max).contains(&s));
        d.set_slow(1_000_000);
        d.append("a/x.log", b"!").unwrap();
        assert!(d.take_latency() >= 1_000_000);
        // A clone is the same disk.
        let other = d.clone();
        assert_eq!(other.len("a/x.log").unwrap(), 6);
        other.mem().crash(|f| f.synced_len);
        assert_eq!(
            d.len("a/x.log").unwrap(),
            5,
            "unsynced byte lost on power loss"
        );
        assert_eq!(d.op_counts(), (2, 1));
    }
}
