//! An in-memory disk for tests and the simulator: tracks, per file, how much has been synced, and can
//! crash (losing or tearing unsynced bytes), flip bits, fail reads and run out of space.

use crate::fxhash::FastMap;
use crate::log::storage::{validate_path, Storage, StorageError};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

/// Size of each [`Chunks`] piece. Small enough that the first piece's doublings copy
/// little (files are often rewritten and regrown, like the recovery-point journal), large
/// enough that most reads lie in one piece.
const CHUNK: usize = 16 << 10;

/// A file's first piece grows by doubling up to this size, then to a whole [`CHUNK`].
const FIRST_PIECE_DOUBLINGS: usize = 1 << 10;

/// A file's bytes, kept in pieces of [`CHUNK`] bytes so that an append never moves the
/// bytes already written: one `Vec` per file doubled as a segment filled, copying the
/// whole file each time (~0.7% of a simulation). Every piece but the last is full; the
/// first grows like a `Vec` (small files stay small), the later ones are allocated whole.
#[derive(Clone, Debug, Default)]
struct Chunks {
    pieces: Vec<Vec<u8>>,
    len: usize,
}

impl Chunks {
    fn from_slice(data: &[u8]) -> Self {
        let mut c = Self::default();
        c.extend_from_slice(data);
        c
    }

    fn len(&self) -> usize {
        self.len
    }

    fn extend_from_slice(&mut self, data: &[u8]) {
        // Most appends fit in the last piece's capacity.
        match self.pieces.last_mut() {
            Some(last) if last.len() + data.len() <= last.capacity().min(CHUNK) => {
                last.extend_from_slice(data);
                self.len += data.len();
            }
            _ => self.extend_slow(data),
        }
    }

    #[cold]
    fn extend_slow(&mut self, mut data: &[u8]) {
        self.len += data.len();
        while !data.is_empty() {
            let last = match self.pieces.last_mut() {
                Some(p) if p.len() < CHUNK => p,
                _ => {
                    let cap = if self.pieces.is_empty() { 0 } else { CHUNK };
                    self.pieces.push(Vec::with_capacity(cap));
                    self.pieces.last_mut().expect("just pushed")
                }
            };
            let take = data.len().min(CHUNK - last.len());
            let need = last.len() + take;
            if need > last.capacity() {
                // Doubling as a Vec would while the file is small, then straight to one
                // chunk: the doublings' copies of the larger sizes were most of this.
                let cap = if need > FIRST_PIECE_DOUBLINGS {
                    CHUNK
                } else {
                    need.max(last.capacity() * 2).min(CHUNK)
                };
                last.reserve_exact(cap - last.len());
            }
            last.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
    }

    /// Copies bytes from `pos` into `buf` (as many as both hold); returns how many.
    fn read_at(&self, pos: usize, buf: &mut [u8]) -> usize {
        let n = self.len.saturating_sub(pos).min(buf.len());
        // Most reads lie within one piece.
        if let Some(src) = self
            .pieces
            .get(pos / CHUNK)
            .and_then(|p| p.get(pos % CHUNK..pos % CHUNK + n))
        {
            buf[..n].copy_from_slice(src);
            return n;
        }
        let mut done = 0;
        while done < n {
            let at = pos + done;
            let piece = &self.pieces[at / CHUNK][at % CHUNK..];
            let k = piece.len().min(n - done);
            buf[done..done + k].copy_from_slice(&piece[..k]);
            done += k;
        }
        n
    }

    fn byte_mut(&mut self, pos: usize) -> Option<&mut u8> {
        if pos >= self.len {
            return None;
        }
        Some(&mut self.pieces[pos / CHUNK][pos % CHUNK])
    }

    fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.pieces.truncate(len.div_ceil(CHUNK));
        if let Some(last) = self.pieces.last_mut() {
            last.truncate(len - (len - 1) / CHUNK * CHUNK);
        }
        self.len = len;
    }

    fn to_vec(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

#[derive(Clone, Debug, Default)]
struct MemFile {
    data: Chunks,
    /// Bytes `[0, synced_len)` survive any crash.
    synced_len: u64,
    /// [`Storage::generation`]: changed by anything but an append.
    gen: u64,
}

#[derive(Debug, Default)]
struct Disk {
    /// Each path's place in `slots`. Hashed, because a BTreeMap's comparisons of paths that
    /// share long prefixes (`topic-3/00000000000000000000.log`) made the simulated disk ~5%
    /// of a simulation. Anything that walks the files sorts their paths first
    /// ([`Disk::sorted_paths`]), so no hash order reaches a run.
    files: FastMap<String, usize>,
    /// The files; `None` is a free place (reused by the next new file). A path keeps its
    /// place until it is removed, so a handle may remember it ([`Recent`]).
    slots: Vec<Option<MemFile>>,
    free: Vec<usize>,
    /// Paths removed so far: a place a handle remembers is still its path's while this
    /// has not changed.
    removals: u64,
    capacity: Option<u64>,
    read_error_all: bool,
    read_error_paths: BTreeSet<String>,
    fail_syncs: bool,
    /// The last generation handed out (generations are never reused on this disk).
    last_gen: u64,
}

impl Disk {
    fn fresh_gen(&mut self) -> u64 {
        self.last_gen += 1;
        self.last_gen
    }
    /// Every path, sorted: the order every walk over the files uses.
    fn sorted_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.files.keys().cloned().collect();
        paths.sort_unstable();
        paths
    }
    fn used(&self) -> u64 {
        // A sum: the order does not matter.
        self.slots
            .iter()
            .flatten()
            .map(|f| f.data.len() as u64)
            .sum()
    }
    fn check_space(&self, path: &str, extra: u64) -> Result<(), StorageError> {
        match self.capacity {
            Some(cap) if self.used().saturating_add(extra) > cap => Err(StorageError::DiskFull {
                path: path.to_string(),
            }),
            _ => Ok(()),
        }
    }
    fn get(&self, path: &str) -> Option<&MemFile> {
        self.files.get(path).map(|&i| self.at(i))
    }
    fn get_mut(&mut self, path: &str) -> Option<&mut MemFile> {
        let i = *self.files.get(path)?;
        Some(self.at_mut(i))
    }
    fn at(&self, slot: usize) -> &MemFile {
        self.slots[slot].as_ref().expect("a listed file's place")
    }
    fn at_mut(&mut self, slot: usize) -> &mut MemFile {
        self.slots[slot].as_mut().expect("a listed file's place")
    }
    /// Makes `path` hold `file`: in its place if it exists (so remembered places stay
    /// right), else in a free or new one. Returns the place.
    fn put(&mut self, path: &str, file: MemFile) -> usize {
        if let Some(&i) = self.files.get(path) {
            self.slots[i] = Some(file);
            return i;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(file);
                i
            }
            None => {
                self.slots.push(Some(file));
                self.slots.len() - 1
            }
        };
        self.files.insert(path.to_string(), i);
        i
    }
    fn remove(&mut self, path: &str) {
        if let Some(i) = self.files.remove(path) {
            self.slots[i] = None;
            self.free.push(i);
            self.removals += 1;
        }
    }
}

/// The places ([`Disk::slots`]) of the files one handle used last: a log names the same few
/// files (its active segment and indexes, the recovery-point journal) on every append,
/// sync and read, and hashing the path each time was ~2% of a simulation. Comparing the
/// path with a few remembered ones (mostly of other lengths) is cheaper. Valid while
/// [`Disk::removals`] is `removals`; a miss asks the map.
#[derive(Clone, Debug, Default)]
struct Recent {
    removals: u64,
    entries: Vec<(String, usize)>,
    /// The entry a miss replaces once `entries` is full.
    next: usize,
}

/// Files a handle remembers: a log's active segment, its two indexes, the journal, and a
/// few older segments it reads.
const RECENT: usize = 8;

impl Recent {
    /// The place of `path` on `disk`, remembered for next time.
    #[inline]
    fn find(&mut self, disk: &Disk, path: &str) -> Option<usize> {
        if self.removals != disk.removals {
            self.entries.clear();
            self.removals = disk.removals;
        }
        if let Some(&(_, i)) = self.entries.iter().find(|(p, _)| p == path) {
            debug_assert_eq!(disk.files.get(path), Some(&i));
            return Some(i);
        }
        self.miss(disk, path)
    }

    /// [`Self::find`] for a caller holding only `&self` (it remembers nothing new): a
    /// read asks the generation of every segment it scans, and hashing the path each time
    /// was ~0.6% of a simulation.
    #[inline]
    fn peek(&self, disk: &Disk, path: &str) -> Option<usize> {
        if self.removals == disk.removals {
            if let Some(&(_, i)) = self.entries.iter().find(|(p, _)| p == path) {
                debug_assert_eq!(disk.files.get(path), Some(&i));
                return Some(i);
            }
        }
        disk.files.get(path).copied()
    }

    #[cold]
    fn miss(&mut self, disk: &Disk, path: &str) -> Option<usize> {
        let i = *disk.files.get(path)?;
        if self.entries.len() < RECENT {
            self.entries.push((path.to_string(), i));
        } else {
            self.entries[self.next] = (path.to_string(), i);
            self.next = (self.next + 1) % RECENT;
        }
        Some(i)
    }
}

/// What a crash callback sees of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashFile {
    pub path: String,
    pub len: u64,
    pub synced_len: u64,
}

/// A cheap-to-clone handle to one simulated disk. All clones see the same files; the
/// simulator keeps one to inject faults while a log uses another.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    disk: Rc<RefCell<Disk>>,
    recent: Recent,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates a power loss: for each file (in path order) `keep` chooses how many bytes
    /// survive; the answer is clamped to `synced_len..=len`, so synced data is never lost
    /// and unsynced data is lost entirely, partly (a torn write) or not at all. Afterwards
    /// every surviving byte counts as synced.
    pub fn crash(&self, mut keep: impl FnMut(&CrashFile) -> u64) {
        let mut disk = self.disk.borrow_mut();
        let disk = &mut *disk;
        for path in disk.sorted_paths() {
            let gen = disk.fresh_gen();
            let f = disk.get_mut(&path).expect("a listed path");
            f.gen = gen;
            let cf = CrashFile {
                path,
                len: f.data.len() as u64,
                synced_len: f.synced_len,
            };
            let k = keep(&cf).clamp(cf.synced_len, cf.len);
            f.data.truncate(k as usize);
            f.synced_len = k;
        }
    }

    /// Crash losing every unsynced byte.
    pub fn crash_lose_unsynced(&self) {
        self.crash(|f| f.synced_len);
    }

    /// Flips one bit (`bit` 0..8) of byte `pos` of `path`. Returns false if out of range.
    pub fn flip_bit(&self, path: &str, pos: u64, bit: u8) -> bool {
        let mut disk = self.disk.borrow_mut();
        let gen = disk.fresh_gen();
        match disk.get_mut(path) {
            Some(f) if bit < 8 => match f.data.byte_mut(pos as usize) {
                Some(b) => {
                    *b ^= 1 << bit;
                    f.gen = gen;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    /// Makes reads of `path` (or, with `None`, of every file) fail while `on`.
    pub fn set_read_error(&self, path: Option<&str>, on: bool) {
        let mut disk = self.disk.borrow_mut();
        match (path, on) {
            (None, on) => {
                disk.read_error_all = on;
                if !on {
                    disk.read_error_paths.clear();
                }
            }
            (Some(p), true) => {
                disk.read_error_paths.insert(p.to_string());
            }
            (Some(p), false) => {
                disk.read_error_paths.remove(p);
            }
        }
    }

    /// Makes every `sync` fail (an fsync error) while `on`; nothing becomes durable.
    pub fn set_fail_syncs(&self, on: bool) {
        self.disk.borrow_mut().fail_syncs = on;
    }

    /// Total bytes the disk may hold (`None`: unlimited). Writes past it fail with DiskFull.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.disk.borrow_mut().capacity = capacity;
    }

    /// Every file as `(path, len, synced_len)`, sorted by path.
    pub fn files(&self) -> Vec<(String, u64, u64)> {
        let disk = self.disk.borrow();
        disk.sorted_paths()
            .into_iter()
            .map(|p| {
                let f = disk.get(&p).expect("a listed path");
                (p, f.data.len() as u64, f.synced_len)
            })
            .collect()
    }

    /// Total bytes stored.
    pub fn used_bytes(&self) -> u64 {
        self.disk.borrow().used()
    }

    /// A copy of a file's bytes (for tests and debugging), ignoring injected read errors.
    pub fn contents(&self, path: &str) -> Option<Vec<u8>> {
        self.disk.borrow().get(path).map(|f| f.data.to_vec())
    }

    /// Overwrites a file's bytes directly, as synced (for tests that plant bad files).
    pub fn put_raw(&self, path: &str, data: &[u8]) {
        // Stored paths are valid ones (`append` relies on it).
        validate_path(path).expect("put_raw: invalid path");
        let mut disk = self.disk.borrow_mut();
        let gen = disk.fresh_gen();
        disk.put(
            path,
            MemFile {
                data: Chunks::from_slice(data),
                synced_len: data.len() as u64,
                gen,
            },
        );
    }
}

fn not_found(path: &str) -> StorageError {
    StorageError::NotFound {
        path: path.to_string(),
    }
}

impl Storage for MemStorage {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        let dir = dir.trim_end_matches('/');
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            validate_path(dir)?;
            format!("{dir}/")
        };
        let disk = self.disk.borrow();
        let mut names: Vec<String> = disk
            .files
            .keys()
            .filter_map(|p| {
                let rest = p.strip_prefix(&prefix)?;
                (!rest.contains('/')).then(|| rest.to_string())
            })
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    fn exists(&self, path: &str) -> bool {
        self.disk.borrow().files.contains_key(path)
    }

    fn len(&self, path: &str) -> Result<u64, StorageError> {
        self.disk
            .borrow()
            .get(path)
            .map(|f| f.data.len() as u64)
            .ok_or_else(|| not_found(path))
    }

    fn generation(&self, path: &str) -> Option<u64> {
        let disk = self.disk.borrow();
        self.recent.peek(&disk, path).map(|i| disk.at(i).gen)
    }

    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        let disk = self.disk.borrow();
        if disk.read_error_all || disk.read_error_paths.contains(path) {
            return Err(StorageError::InjectedReadError {
                path: path.to_string(),
            });
        }
        let slot = self
            .recent
            .find(&disk, path)
            .ok_or_else(|| not_found(path))?;
        let f = disk.at(slot);
        if pos >= f.data.len() as u64 {
            return Ok(0);
        }
        Ok(f.data.read_at(pos as usize, buf))
    }

    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        let mut disk = self.disk.borrow_mut();
        // A write that does not fit is torn, as a short write followed by ENOSPC is: the
        // prefix that fits lands in the file (unsynced), and the call fails.
        let room = match disk.capacity {
            Some(cap) => cap.saturating_sub(disk.used()),
            None => u64::MAX,
        };
        let fits = (data.len() as u64).min(room) as usize;
        let write = fits > 0 || data.len() as u64 <= room;
        match self.recent.find(&disk, path) {
            // Every stored path was checked when its file was made (here, `write_atomic`,
            // `put_raw`): only a new one needs the check, which was 1.6% of a simulation.
            Some(slot) => {
                if write {
                    disk.at_mut(slot).data.extend_from_slice(&data[..fits]);
                }
            }
            None => {
                validate_path(path)?;
                if write {
                    let gen = disk.fresh_gen();
                    let mut f = MemFile {
                        gen,
                        ..MemFile::default()
                    };
                    f.data.extend_from_slice(&data[..fits]);
                    disk.put(path, f);
                }
            }
        }
        if fits < data.len() {
            return Err(StorageError::DiskFull {
                path: path.to_string(),
            });
        }
        Ok(())
    }

    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        let mut disk = self.disk.borrow_mut();
        if disk.fail_syncs {
            return Err(StorageError::Io {
                path: path.to_string(),
                reason: "injected fsync failure".into(),
            });
        }
        let slot = self
            .recent
            .find(&disk, path)
            .ok_or_else(|| not_found(path))?;
        let f = disk.at_mut(slot);
        f.synced_len = f.data.len() as u64;
        Ok(())
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        let mut disk = self.disk.borrow_mut();
        let gen = disk.fresh_gen();
        let f = disk.get_mut(path).ok_or_else(|| not_found(path))?;
        f.gen = gen;
        if (f.data.len() as u64) > len {
            f.data.truncate(len as usize);
        }
        f.synced_len = f.synced_len.min(f.data.len() as u64);
        Ok(())
    }

    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        self.disk.borrow_mut().remove(path);
        Ok(())
    }

    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        validate_path(path)?;
        let mut disk = self.disk.borrow_mut();
        let old = disk.get(path).map_or(0, |f| f.data.len() as u64);
        disk.check_space(path, (data.len() as u64).saturating_sub(old))?;
        let gen = disk.fresh_gen();
        disk.put(
            path,
            MemFile {
                data: Chunks::from_slice(data),
                synced_len: data.len() as u64,
                gen,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_checks_a_new_path_and_keeps_appending_to_a_known_one() {
        let mut m = MemStorage::new();
        for bad in ["", "/a", "a//b", "a/../b", "a\\b"] {
            assert!(
                matches!(m.append(bad, b"x"), Err(StorageError::InvalidPath { .. })),
                "{bad:?} accepted"
            );
            assert!(!m.exists(bad));
        }
        m.append("d/a", b"he").unwrap();
        m.append("d/a", b"llo").unwrap();
        assert_eq!(m.contents("d/a").unwrap(), b"hello");
    }

    /// A file spread over several chunks reads, cuts, flips and crashes exactly like one
    /// contiguous buffer (the reference here), at and across chunk boundaries.
    #[test]
    fn chunked_file_matches_a_contiguous_one() {
        let mut m = MemStorage::new();
        let mut want: Vec<u8> = Vec::new();
        let sizes = [
            0,
            1,
            7,
            FIRST_PIECE_DOUBLINGS - 9,
            20,
            CHUNK - 8,
            CHUNK,
            3,
            2 * CHUNK + 5,
            100,
            CHUNK - 100,
        ];
        for (i, &n) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
            m.append("d/f", &data).unwrap();
            want.extend_from_slice(&data);
        }
        let check = |m: &mut MemStorage, want: &[u8]| {
            assert_eq!(m.contents("d/f").unwrap(), want);
            assert_eq!(m.len("d/f").unwrap(), want.len() as u64);
            for pos in [
                0,
                1,
                CHUNK - 3,
                CHUNK,
                2 * CHUNK - 1,
                3 * CHUNK + 2,
                want.len(),
            ] {
                for n in [1, 5, CHUNK + 9, 3 * CHUNK] {
                    let mut buf = vec![0xAA; n];
                    let got = m.read_at("d/f", pos as u64, &mut buf).unwrap();
                    let end = want.len().min(pos + n).max(pos.min(want.len()));
                    let exp = &want[pos.min(want.len())..end];
                    assert_eq!(&buf[..got], exp, "read {n} at {pos}");
                }
            }
        };
        check(&mut m, &want);
        for pos in [0, CHUNK - 1, CHUNK, 2 * CHUNK + 1] {
            assert!(m.flip_bit("d/f", pos as u64, 3));
            want[pos] ^= 1 << 3;
        }
        assert!(!m.flip_bit("d/f", want.len() as u64, 0));
        check(&mut m, &want);
        for cut in [
            3 * CHUNK + 1,
            3 * CHUNK,
            2 * CHUNK - 1,
            CHUNK + 1,
            CHUNK,
            5,
            0,
        ] {
            m.truncate("d/f", cut as u64).unwrap();
            want.truncate(cut);
            check(&mut m, &want);
            // Appending after a cut continues where the cut left off.
            let more = vec![cut as u8; CHUNK + 3];
            m.append("d/f", &more).unwrap();
            want.extend_from_slice(&more);
            check(&mut m, &want);
        }
        m.sync("d/f").unwrap();
        m.append("d/f", &[9; 2 * CHUNK]).unwrap();
        let keep = want.len() + CHUNK + 1;
        want.extend_from_slice(&[9; CHUNK + 1]);
        m.crash(|_| keep as u64);
        check(&mut m, &want);
        assert_eq!(m.used_bytes(), want.len() as u64);
    }

    /// A handle remembers where its files are; a file removed (through any handle) and its
    /// place reused by another must not leave it writing, syncing or reading the wrong file.
    #[test]
    fn remembered_files_follow_removal_and_reuse() {
        let mut m = MemStorage::new();
        let mut other = m.clone();
        m.append("d/a", b"aa").unwrap();
        m.append("d/b", b"bb").unwrap();
        other.remove("d/a").unwrap();
        other.append("d/c", b"cc").unwrap(); // takes a's old place
        let mut buf = [0u8; 2];
        assert!(matches!(
            m.read_at("d/a", 0, &mut buf),
            Err(StorageError::NotFound { .. })
        ));
        assert!(matches!(m.sync("d/a"), Err(StorageError::NotFound { .. })));
        // The generation of a remembered path asked through `&self` follows it too.
        assert_eq!(m.generation("d/a"), None);
        assert_eq!(m.generation("d/c"), other.generation("d/c"));
        assert_ne!(m.generation("d/c"), m.generation("d/b"));
        m.append("d/a", b"A").unwrap();
        m.append("d/c", b"C").unwrap();
        assert_eq!(m.contents("d/a").unwrap(), b"A");
        assert_eq!(m.contents("d/c").unwrap(), b"ccC");
        assert_eq!(m.contents("d/b").unwrap(), b"bb");
        // Replacing a file keeps its place: remembered places stay right.
        let gen_b = m.generation("d/b");
        other.write_atomic("d/b", b"new").unwrap();
        assert_ne!(
            m.generation("d/b"),
            gen_b,
            "a replaced file's generation changes"
        );
        assert_eq!(m.generation("d/b"), other.generation("d/b"));
        m.append("d/b", b"!").unwrap();
        assert_eq!(m.contents("d/b").unwrap(), b"new!");
        // More files than a handle remembers.
        for i in 0..3 * RECENT {
            m.append(&format!("e/{i}"), &[i as u8]).unwrap();
        }
        for i in (0..3 * RECENT).rev() {
            m.append(&format!("e/{i}"), &[i as u8]).unwrap();
            m.sync(&format!("e/{i}")).unwrap();
            assert_eq!(m.contents(&format!("e/{i}")).unwrap(), [i as u8; 2]);
        }
        assert_eq!(m.files().len(), 3 + 3 * RECENT);
    }

    #[test]
    #[should_panic(expected = "invalid path")]
    fn put_raw_refuses_an_invalid_path() {
        MemStorage::new().put_raw("/abs", b"x");
    }

    /// The files live in a hash map: every walk over them (a crash's, `list`, `files`) must
    /// still go in path order, whatever order they were made in, or a seed's crash would
    /// draw its random tears in a different order from run to run.
    #[test]
    fn walks_go_in_path_order() {
        let mut m = MemStorage::new();
        let names: Vec<String> = (0..64)
            .rev()
            .map(|i| format!("t-{}/{i:020}.log", i % 3))
            .collect();
        for n in &names {
            m.append(n, b"x").unwrap();
        }
        m.append("t-1/a/nested", b"x").unwrap();
        let mut sorted = names.clone();
        sorted.push("t-1/a/nested".to_string());
        sorted.sort();
        let mut seen = Vec::new();
        m.crash(|f| {
            seen.push(f.path.clone());
            f.len
        });
        assert_eq!(seen, sorted);
        let listed: Vec<String> = m.files().into_iter().map(|f| f.0).collect();
        assert_eq!(listed, sorted);
        let mut in_dir: Vec<String> = sorted
            .iter()
            .filter_map(|p| p.strip_prefix("t-1/"))
            .filter(|r| !r.contains('/'))
            .map(str::to_string)
            .collect();
        in_dir.sort();
        assert_eq!(m.list("t-1").unwrap(), in_dir);
        assert_eq!(m.list("t-1/a").unwrap(), vec!["nested".to_string()]);
    }

    #[test]
    fn crash_keeps_synced_and_clamps() {
        let mut m = MemStorage::new();
        m.append("d/a", b"hello").unwrap();
        m.sync("d/a").unwrap();
        m.append("d/a", b" world").unwrap();
        let probe = m.clone();
        probe.crash(|f| {
            assert_eq!((f.len, f.synced_len), (11, 5));
            0 // clamped up to synced_len
        });
        assert_eq!(m.contents("d/a").unwrap(), b"hello");
        m.append("d/a", b"!!").unwrap();
        probe.crash(|f| f.len + 100); // clamped down to len
        assert_eq!(m.contents("d/a").unwrap(), b"hello!!");
        assert_eq!(m.files(), vec![("d/a".to_string(), 7, 7)]);
    }

    #[test]
    fn faults_and_listing() {
        let mut m = MemStorage::new();
        m.append("d/b", b"x").unwrap();
        m.append("d/a", b"y").unwrap();
        m.append("d/sub/c", b"z").unwrap();
        m.append("e", b"z").unwrap();
        assert_eq!(m.list("d").unwrap(), vec!["a", "b"]);
        assert_eq!(m.list("").unwrap(), vec!["e"]);
        assert!(m.flip_bit("d/a", 0, 0));
        assert!(!m.flip_bit("d/a", 1, 0));
        assert_eq!(m.contents("d/a").unwrap(), b"x");
        m.set_read_error(Some("d/a"), true);
        let mut buf = [0u8; 1];
        assert!(matches!(
            m.read_at("d/a", 0, &mut buf),
            Err(StorageError::InjectedReadError { .. })
        ));
        assert!(m.read_at("d/b", 0, &mut buf).is_ok());
        m.set_read_error(None, false);
        assert!(m.read_at("d/a", 0, &mut buf).is_ok());
        m.set_capacity(Some(5));
        assert!(matches!(
            m.append("d/a", b"12"),
            Err(StorageError::DiskFull { .. })
        ));
        // The write was torn: its first byte landed (unsynced), the rest did not.
        assert_eq!(m.contents("d/a").unwrap(), b"x1");
        assert!(matches!(
            m.append("d/a", b"1"),
            Err(StorageError::DiskFull { .. })
        ));
        assert_eq!(
            m.contents("d/a").unwrap(),
            b"x1",
            "a full disk writes nothing"
        );
        m.set_capacity(Some(6));
        m.append("d/a", b"1").unwrap();
        assert!(matches!(
            m.append("../x", b"1"),
            Err(StorageError::InvalidPath { .. })
        ));
    }
}
