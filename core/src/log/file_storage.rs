//! Real files under a root directory, with fsync. Used by the node runtime and the
//! benchmark. Open file handles are cached (shared between clones) so appends do not pay
//! an open/close each.

use super::storage::{validate_path, Storage, StorageError};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How many open handles the cache keeps before closing one.
const MAX_OPEN_FILES: usize = 256;

/// Files under `root`. Cheap to clone; clones share the handle cache.
#[derive(Clone, Debug)]
pub struct FileStorage {
    root: PathBuf,
    handles: Arc<Mutex<BTreeMap<String, File>>>,
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
            handles: Arc::default(),
        })
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
        f: impl FnOnce(&mut File) -> io::Result<T>,
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
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create(create)
                .open(&full)
                .map_err(|e| io_err(path, e))?;
            if !existed {
                // Make the new directory entry durable, so a synced file cannot vanish.
                sync_dir(&parent).map_err(|e| io_err(path, e))?;
            }
            if cache.len() >= MAX_OPEN_FILES {
                cache.pop_first();
            }
            cache.insert(path.to_string(), file);
        }
        let file = cache.get_mut(path).expect("inserted above");
        f(file).map_err(|e| io_err(path, e))
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
        fs::metadata(full)
            .map(|m| m.len())
            .map_err(|e| io_err(path, e))
    }

    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.with_handle(path, false, |f| loop {
            match f.read_at(buf, pos) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        })
    }

    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.with_handle(path, true, |f| f.write_all(data))
    }

    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        self.with_handle(path, false, |f| f.sync_data())
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        self.with_handle(path, false, |f| {
            if f.metadata()?.len() > len {
                f.set_len(len)?;
            }
            f.sync_all()
        })
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
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStorage::new(dir.path()).unwrap();
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
}
