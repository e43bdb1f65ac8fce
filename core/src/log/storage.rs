//! The small storage trait all log file access goes through, so the same log code runs on
//! real files (`FileStorage` (in skein-node)) and on the simulator's faulty disk
//! ([`super::MemStorage`]).

use thiserror::Error;

/// A storage failure, naming the file it happened on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StorageError {
    #[error("{path}: no such file")]
    NotFound { path: String },
    #[error("{path}: disk full")]
    DiskFull { path: String },
    #[error("{path}: injected read error")]
    InjectedReadError { path: String },
    #[error("{path}: invalid path (must be relative, '/'-separated, without '..' or empty parts)")]
    InvalidPath { path: String },
    #[error("{path}: I/O error: {reason}")]
    Io { path: String, reason: String },
}

impl StorageError {
    /// The file the error is about.
    pub fn path(&self) -> &str {
        match self {
            StorageError::NotFound { path }
            | StorageError::DiskFull { path }
            | StorageError::InjectedReadError { path }
            | StorageError::InvalidPath { path }
            | StorageError::Io { path, .. } => path,
        }
    }
}

/// File access for the log. Paths are '/'-separated and relative to the storage root.
///
/// Durability contract: `append` is volatile until `sync`; `truncate`, `remove` and
/// `write_atomic` are durable when they return (the log relies on a truncation never being
/// undone by a crash).
pub trait Storage {
    /// File names (not paths) directly inside `dir`, sorted. A missing dir lists as empty.
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError>;
    fn exists(&self, path: &str) -> bool;
    fn len(&self, path: &str) -> Result<u64, StorageError>;
    /// Reads up to `buf.len()` bytes at `pos`; returns how many were read (short at EOF).
    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError>;
    /// Appends `data`, creating the file (and its directory) if needed.
    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError>;
    /// Makes everything appended so far durable.
    fn sync(&mut self, path: &str) -> Result<(), StorageError>;
    /// Cuts the file to `len` bytes (no-op if shorter). Durable on return.
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError>;
    /// Deletes the file; durable on return. Removing a missing file is not an error.
    fn remove(&mut self, path: &str) -> Result<(), StorageError>;
    /// Replaces the whole file with `data`, atomically (old or new content after a crash,
    /// never a mix) and durably on return.
    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError>;

    /// A number that stays the same for as long as the bytes already in `path` stay as they
    /// were (appends do not change it; anything that may alter or cut existing bytes does:
    /// a bit flip, a crash, a truncation, replacing or re-creating the file), and is never
    /// reused for the same path. `None`: not tracked (the default), so a caller must not
    /// assume bytes it checked earlier are unchanged. The log uses it to skip re-checking
    /// batches it wrote or checked itself (see `Segment::verified`).
    fn generation(&self, _path: &str) -> Option<u64> {
        None
    }

    /// Reads exactly `buf.len()` bytes at `pos`, or fails with `Truncated`-like `Io` error.
    fn read_exact_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(path, pos + done as u64, &mut buf[done..])?;
            if n == 0 {
                return Err(StorageError::Io {
                    path: path.to_string(),
                    reason: format!(
                        "unexpected end of file at byte {} (wanted {} bytes at {pos})",
                        pos + done as u64,
                        buf.len()
                    ),
                });
            }
            done += n;
        }
        Ok(())
    }

    /// Reads a whole (small) file.
    fn read_all(&mut self, path: &str) -> Result<Vec<u8>, StorageError> {
        let len = self.len(path)?;
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(path, done as u64, &mut buf[done..])?;
            if n == 0 {
                break;
            }
            done += n;
        }
        buf.truncate(done);
        Ok(buf)
    }
}

/// Joins a directory and a file name into a storage path.
pub fn join(dir: &str, name: &str) -> String {
    let dir = dir.trim_end_matches('/');
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Checks a storage path is relative, '/'-separated, with no empty, '.' or '..' parts.
pub fn validate_path(path: &str) -> Result<(), StorageError> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..");
    if bad {
        Err(StorageError::InvalidPath {
            path: path.to_string(),
        })
    } else {
        Ok(())
    }
}
