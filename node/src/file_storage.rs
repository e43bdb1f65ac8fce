//! Real files under a root directory, with fsync. Used by the node runtime and the
//! benchmark. Open file handles are cached (shared between clones) so appends do not pay
//! an open/close each. Appends go through the page cache by default, or with O_DIRECT
//! ([`FileStorage::with_direct_io`], Linux) where page-cache writeback is the bottleneck.

#[cfg(target_os = "linux")]
mod direct_file;

#[cfg(target_os = "linux")]
use direct_file::DirectFile;
use skein_core::log::storage::validate_path;
use skein_core::log::{Storage, StorageError};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How many open handles the cache keeps before closing one.
const MAX_OPEN_FILES: usize = 256;

/// Files under `root`. Cheap to clone; clones share the handle cache.
#[derive(Clone)]
pub struct FileStorage {
    root: PathBuf,
    direct: bool,
    handles: Arc<Mutex<BTreeMap<String, Handle>>>,
}

impl std::fmt::Debug for FileStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStorage")
            .field("root", &self.root)
            .field("direct", &self.direct)
            .finish()
    }
}

/// A cached open file.
enum Handle {
    Buffered(File),
    #[cfg(target_os = "linux")]
    Direct(DirectFile),
}

impl Handle {
    fn len(&self) -> io::Result<u64> {
        match self {
            Handle::Buffered(f) => Ok(f.metadata()?.len()),
            #[cfg(target_os = "linux")]
            Handle::Direct(d) => Ok(d.len()),
        }
    }
    fn read_at(&mut self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        match self {
            Handle::Buffered(f) => loop {
                match f.read_at(buf, pos) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r,
                }
            },
            #[cfg(target_os = "linux")]
            Handle::Direct(d) => d.read_at(buf, pos),
        }
    }
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Handle::Buffered(f) => f.write_all(data),
            #[cfg(target_os = "linux")]
            Handle::Direct(d) => d.append(data),
        }
    }
    fn sync(&mut self) -> io::Result<()> {
        match self {
            Handle::Buffered(f) => f.sync_data(),
            #[cfg(target_os = "linux")]
            Handle::Direct(d) => d.sync(),
        }
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        match self {
            Handle::Buffered(f) => {
                if f.metadata()?.len() > len {
                    f.set_len(len)?;
                }
                f.sync_all()
            }
            #[cfg(target_os = "linux")]
            Handle::Direct(d) => d.truncate(len),
        }
    }
}

fn io_err(path: &str, e: io::Error) -> StorageError {
    match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::NotFound, _) => StorageError::NotFound {
            path: path.to_string(),
        },
        (_, Some(28)) => StorageError::DiskFull {
            path: path.to_string(),
        }, // ENOSPC
        _ => StorageError::Io {
            path: path.to_string(),
            reason: e.to_string(),
        },
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl FileStorage {
    /// Storage rooted at `root` (created if missing).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| io_err(&root.display().to_string(), e))?;
        Ok(Self {
            root,
            direct: false,
            handles: Arc::default(),
        })
    }

    /// Like [`FileStorage::new`], but appends bypass the page cache (O_DIRECT, whole
    /// 4 KiB blocks; Linux only, elsewhere and on file systems without O_DIRECT support it
    /// silently uses the buffered path). Reads of recent appends are served from memory.
    pub fn with_direct_io(root: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let mut s = Self::new(root)?;
        s.direct = cfg!(target_os = "linux");
        Ok(s)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn full(&self, path: &str) -> Result<PathBuf, StorageError> {
        validate_path(path)?;
        Ok(self.root.join(path))
    }

    fn with_handle<T>(
        &self,
        path: &str,
        create: bool,
        f: impl FnOnce(&mut Handle) -> io::Result<T>,
    ) -> Result<T, StorageError> {
        let full = self.full(path)?;
        let mut cache = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.contains_key(path) {
            let existed = full.exists();
            if !existed && !create {
                return Err(StorageError::NotFound {
                    path: path.to_string(),
                });
            }
            let parent = full.parent().unwrap_or(&self.root).to_path_buf();
            if !existed {
                fs::create_dir_all(&parent).map_err(|e| io_err(path, e))?;
            }
            let handle = self
                .open_handle(&full, create)
                .map_err(|e| io_err(path, e))?;
            if !existed {
                // Make the new directory entry durable, so a synced file cannot vanish.
                sync_dir(&parent).map_err(|e| io_err(path, e))?;
            }
            if cache.len() >= MAX_OPEN_FILES {
                cache.pop_first();
            }
            cache.insert(path.to_string(), handle);
        }
        let handle = cache.get_mut(path).expect("inserted above");
        f(handle).map_err(|e| io_err(path, e))
    }

    fn open_handle(&self, full: &Path, create: bool) -> io::Result<Handle> {
        #[cfg(target_os = "linux")]
        if self.direct {
            match DirectFile::open(full, create) {
                Ok(d) => return Ok(Handle::Direct(d)),
                // No O_DIRECT on this file system: fall back to buffered appends.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) => return Err(e),
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(create)
            .open(full)?;
        Ok(Handle::Buffered(file))
    }

    fn forget(&self, path: &str) {
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path);
    }
}

impl Storage for FileStorage {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        let full = if dir.trim_end_matches('/').is_empty() {
            self.root.clone()
        } else {
            self.full(dir.trim_end_matches('/'))?
        };
        let rd = match fs::read_dir(&full) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(dir, e)),
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| io_err(dir, e))?;
            let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
            if let (true, Some(name)) = (is_file, entry.file_name().to_str()) {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &str) -> bool {
        self.full(path).map(|p| p.is_file()).unwrap_or(false)
    }

    fn len(&self, path: &str) -> Result<u64, StorageError> {
        let full = self.full(path)?;
        if let Some(h) = self
            .handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
        {
            return h.len().map_err(|e| io_err(path, e));
        }
        fs::metadata(full)
            .map(|m| m.len())
            .map_err(|e| io_err(path, e))
    }

    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.with_handle(path, false, |h| h.read_at(buf, pos))
    }

    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.with_handle(path, true, |h| h.append(data))
    }

    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        self.with_handle(path, false, |h| h.sync())
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        self.with_handle(path, false, |h| h.truncate(len))
    }

    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        let full = self.full(path)?;
        self.forget(path);
        match fs::remove_file(&full) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(path, e)),
        }
        sync_dir(full.parent().unwrap_or(&self.root)).map_err(|e| io_err(path, e))
    }

    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        let full = self.full(path)?;
        let parent = full.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&parent).map_err(|e| io_err(path, e))?;
        let mut tmp_name = full.clone().into_os_string();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let write = || -> io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
            fs::rename(&tmp, &full)?;
            sync_dir(&parent)
        };
        self.forget(path);
        write().map_err(|e| io_err(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_on_tempdir() {
        roundtrip(false);
        roundtrip(true);
    }

    fn roundtrip(direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = if direct {
            FileStorage::with_direct_io(dir.path()).unwrap()
        } else {
            FileStorage::new(dir.path()).unwrap()
        };
        assert_eq!(s.list("p").unwrap(), Vec::<String>::new());
        s.append("p/b.log", b"hello").unwrap();
        s.append("p/b.log", b" world").unwrap();
        s.append("p/a.log", b"").unwrap();
        s.sync("p/b.log").unwrap();
        assert_eq!(s.list("p").unwrap(), vec!["a.log", "b.log"]);
        assert_eq!(s.len("p/b.log").unwrap(), 11);
        let mut buf = [0u8; 5];
        assert_eq!(s.read_at("p/b.log", 6, &mut buf).unwrap(), 5);
        assert_eq!(&buf, b"world");
        assert_eq!(s.read_at("p/b.log", 20, &mut buf).unwrap(), 0);
        s.truncate("p/b.log", 5).unwrap();
        assert_eq!(s.read_all("p/b.log").unwrap(), b"hello");
        s.append("p/b.log", b"!").unwrap();
        assert_eq!(s.read_all("p/b.log").unwrap(), b"hello!");
        s.write_atomic("p/cp", b"1").unwrap();
        s.write_atomic("p/cp", b"22").unwrap();
        assert_eq!(s.read_all("p/cp").unwrap(), b"22");
        s.remove("p/a.log").unwrap();
        s.remove("p/a.log").unwrap();
        assert!(!s.exists("p/a.log"));
        assert!(matches!(
            s.read_at("p/zz", 0, &mut buf),
            Err(StorageError::NotFound { .. })
        ));
        assert!(matches!(
            s.append("/abs", b"x"),
            Err(StorageError::InvalidPath { .. })
        ));
    }

    /// Direct appends: large and small writes, reads across the written/buffered boundary,
    /// truncation into written blocks, eviction and reopen all see the same bytes.
    #[test]
    fn direct_io_matches_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStorage::with_direct_io(dir.path()).unwrap();
        let mut model: Vec<u8> = Vec::new();
        let mut x = 12345u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for step in 0..300 {
            match next() % 10 {
                0..=5 => {
                    let n = (next() % 70_000) as usize;
                    let data: Vec<u8> = (0..n).map(|i| (i as u32 ^ step) as u8).collect();
                    s.append("d/f.log", &data).unwrap();
                    model.extend_from_slice(&data);
                }
                6 => s.sync("d/f.log").unwrap(),
                7 => {
                    let len = next() as u64 % (model.len() as u64 + 1);
                    s.truncate("d/f.log", len).unwrap();
                    model.truncate(len as usize);
                }
                8 => {
                    // Drop every handle (as eviction or a restart would).
                    s = FileStorage::with_direct_io(dir.path()).unwrap();
                }
                _ => {}
            }
            assert_eq!(s.len("d/f.log").unwrap(), model.len() as u64, "step {step}");
            if step == 0 {
                // ext4/xfs temp dirs take O_DIRECT; tmpfs would fall back (still correct).
                let h = s.handles.lock().unwrap();
                let direct = matches!(h.get("d/f.log"), Some(Handle::Direct(_)));
                eprintln!("direct I/O in use: {direct}");
            }
            if !model.is_empty() {
                let pos = next() as usize % model.len();
                let mut buf = vec![0u8; (next() % 100_000) as usize];
                let n = s.read_at("d/f.log", pos as u64, &mut buf).unwrap();
                assert_eq!(&buf[..n], &model[pos..(pos + buf.len()).min(model.len())]);
            }
        }
        s.sync("d/f.log").unwrap();
        drop(s);
        assert_eq!(std::fs::read(dir.path().join("d/f.log")).unwrap(), model);
    }
}
