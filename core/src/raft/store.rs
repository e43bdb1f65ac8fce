//! Raft's durable state on a [`Storage`]: the hard state (term and vote), the latest
//! snapshot, and the log entries after it.
//!
//! Files under the Raft directory:
//! - `state`: crc32 + bincode of `(term, voted_for)`, replaced atomically;
//! - `snapshot`: crc32 + bincode of the [`Snapshot`], replaced atomically;
//! - `log`: frames `[len u32][crc32 u32][bincode Entry]`, appended and fsynced before any
//!   reply that depends on them; a conflicting suffix is cut with a durable truncate; a
//!   compaction rewrites the file atomically with the entries after the snapshot.
//!
//! A crash between writing a snapshot and rewriting the log leaves the old log: on open,
//! entries are kept only if they continue the snapshot (the entry at its last index has its
//! term, or the log starts right after it), as Raft's InstallSnapshot rule prescribes.
//! An incomplete or corrupt *last* frame is an unsynced torn tail and is cut; a corrupt
//! frame before the end is synced data gone bad and a typed error, never a silent cut.

use super::message::{Entry, Index, Snapshot, Term};
use crate::log::storage::join;
use crate::log::{Storage, StorageError};
use crate::types::NodeId;

/// What must survive a crash before a node answers a vote: the term it is in and whom it
/// voted for in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HardState {
    pub term: Term,
    pub voted_for: Option<NodeId>,
}

/// Why a Raft node could not open its durable state.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RaftOpenError {
    #[error("raft storage: {0}")]
    Storage(#[from] StorageError),
    #[error("raft {file}: corrupt ({reason})")]
    Corrupt { file: String, reason: String },
    #[error("raft log starts at index {first} but the snapshot ends at {snapshot_index}: entries are missing")]
    Gap { first: Index, snapshot_index: Index },
    #[error("raft config: {0}")]
    Config(String),
}

const FRAME_HEADER: usize = 8;

pub(crate) struct RaftStore<S: Storage> {
    storage: S,
    state_path: String,
    snapshot_path: String,
    log_path: String,
    /// Byte position of each entry's frame in `log`, in index order.
    frames: Vec<u64>,
    /// Index of the first entry in `log` (its frame is `frames[0]`).
    first_index: Index,
    log_len: u64,
}

fn encode_checked<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let body = bincode::serialize(value).expect("raft state encodes");
    let mut out = crc32fast::hash(&body).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn decode_checked<T: serde::de::DeserializeOwned>(
    file: &str,
    bytes: &[u8],
) -> Result<T, RaftOpenError> {
    let corrupt = |reason: String| RaftOpenError::Corrupt {
        file: file.to_string(),
        reason,
    };
    if bytes.len() < 4 {
        return Err(corrupt(format!("{} bytes, too short", bytes.len())));
    }
    let (crc, body) = bytes.split_at(4);
    if u32::from_le_bytes(crc.try_into().expect("4 bytes")) != crc32fast::hash(body) {
        return Err(corrupt("checksum mismatch".into()));
    }
    bincode::deserialize(body).map_err(|e| corrupt(e.to_string()))
}

fn frame(entry: &Entry) -> Vec<u8> {
    let body = bincode::serialize(entry).expect("raft entry encodes");
    let mut out = Vec::with_capacity(FRAME_HEADER + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Everything read back by [`RaftStore::open`].
pub(crate) struct Recovered {
    pub(crate) hard: HardState,
    pub(crate) snapshot: Snapshot,
    pub(crate) entries: Vec<Entry>,
}

impl<S: Storage> RaftStore<S> {
    pub(crate) fn open(mut storage: S, dir: &str) -> Result<(Self, Recovered), RaftOpenError> {
        let state_path = join(dir, "state");
        let snapshot_path = join(dir, "snapshot");
        let log_path = join(dir, "log");
        let hard = if storage.exists(&state_path) {
            decode_checked(&state_path, &storage.read_all(&state_path)?)?
        } else {
            HardState::default()
        };
        let snapshot: Snapshot = if storage.exists(&snapshot_path) {
            decode_checked(&snapshot_path, &storage.read_all(&snapshot_path)?)?
        } else {
            Snapshot::empty()
        };
        let bytes = if storage.exists(&log_path) {
            storage.read_all(&log_path)?
        } else {
            Vec::new()
        };
        let (mut entries, mut positions, good_len) = parse_frames(&log_path, &bytes)?;
        let mut rewrite = good_len < bytes.len() as u64;
        if good_len < bytes.len() as u64 {
            tracing::info!(
                path = %log_path,
                bytes = bytes.len() as u64 - good_len,
                "raft log: cut torn unsynced tail"
            );
        }
        // Keep only entries that continue the snapshot.
        if let Some(first) = entries.first().map(|e| e.index) {
            let s = snapshot.last_index;
            if first > s + 1 {
                return Err(RaftOpenError::Gap {
                    first,
                    snapshot_index: s,
                });
            }
            if first <= s {
                let at = (s - first) as usize;
                let continues = entries
                    .get(at)
                    .is_some_and(|e| e.term == snapshot.last_term);
                let keep = if continues { at + 1 } else { entries.len() };
                entries.drain(..keep);
                positions.clear();
                rewrite = true;
            }
        }
        let mut store = Self {
            storage,
            state_path,
            snapshot_path,
            log_path,
            frames: positions,
            first_index: snapshot.last_index + 1,
            log_len: good_len,
        };
        if rewrite {
            store.rewrite_log(&entries)?;
        }
        debug_assert_eq!(store.frames.len(), entries.len());
        Ok((
            store,
            Recovered {
                hard,
                snapshot,
                entries,
            },
        ))
    }

    pub(crate) fn storage(&self) -> &S {
        &self.storage
    }

    pub(crate) fn into_storage(self) -> S {
        self.storage
    }

    /// Durable on return.
    pub(crate) fn save_hard_state(&mut self, hard: &HardState) -> Result<(), StorageError> {
        self.storage
            .write_atomic(&self.state_path, &encode_checked(hard))
    }

    /// Appends `entries` (which continue the log) and fsyncs them.
    pub(crate) fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        debug_assert_eq!(
            entries[0].index,
            self.first_index + self.frames.len() as Index
        );
        let mut data = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for e in entries {
            positions.push(self.log_len + data.len() as u64);
            data.extend_from_slice(&frame(e));
        }
        self.storage.append(&self.log_path, &data)?;
        self.storage.sync(&self.log_path)?;
        self.frames.extend(positions);
        self.log_len += data.len() as u64;
        Ok(())
    }

    /// Durably drops every entry from `index` on.
    pub(crate) fn truncate_from(&mut self, index: Index) -> Result<(), StorageError> {
        debug_assert!(index >= self.first_index);
        let keep = (index - self.first_index) as usize;
        if keep >= self.frames.len() {
            return Ok(());
        }
        let pos = self.frames[keep];
        self.storage.truncate(&self.log_path, pos)?;
        self.frames.truncate(keep);
        self.log_len = pos;
        Ok(())
    }

    /// Makes `snapshot` durable, then rewrites the log with `rest` (the entries after it).
    pub(crate) fn install_snapshot(
        &mut self,
        snapshot: &Snapshot,
        rest: &[Entry],
    ) -> Result<(), StorageError> {
        debug_assert!(rest
            .first()
            .iter()
            .all(|e| e.index == snapshot.last_index + 1));
        self.storage
            .write_atomic(&self.snapshot_path, &encode_checked(snapshot))?;
        self.first_index = snapshot.last_index + 1;
        self.rewrite_log(rest)
    }

    fn rewrite_log(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        let mut data = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for e in entries {
            positions.push(data.len() as u64);
            data.extend_from_slice(&frame(e));
        }
        self.storage.write_atomic(&self.log_path, &data)?;
        self.frames = positions;
        self.log_len = data.len() as u64;
        if let Some(e) = entries.first() {
            self.first_index = e.index;
        }
        Ok(())
    }
}

/// Parses log frames; returns the entries, their positions and the length of the good
/// prefix. Only the last frame may be bad (torn tail).
fn parse_frames(path: &str, bytes: &[u8]) -> Result<(Vec<Entry>, Vec<u64>, u64), RaftOpenError> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut positions = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < FRAME_HEADER {
            break; // torn header
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        let end = FRAME_HEADER.saturating_add(len);
        if rest.len() < end {
            break; // torn body
        }
        let body = &rest[FRAME_HEADER..end];
        let good = crc32fast::hash(body) == crc;
        let entry = if good {
            bincode::deserialize::<Entry>(body).ok()
        } else {
            None
        };
        let Some(entry) = entry else {
            if pos + end == bytes.len() {
                break; // the last frame, torn inside
            }
            return Err(RaftOpenError::Corrupt {
                file: path.to_string(),
                reason: format!("bad frame at byte {pos} before the end of the log"),
            });
        };
        if let Some(prev) = entries.last() {
            if entry.index != prev.index + 1 || entry.term < prev.term {
                return Err(RaftOpenError::Corrupt {
                    file: path.to_string(),
                    reason: format!(
                        "entry {} (term {}) after entry {} (term {})",
                        entry.index, entry.term, prev.index, prev.term
                    ),
                });
            }
        }
        entries.push(entry);
        positions.push(pos as u64);
        pos += end;
    }
    Ok((entries, positions, pos as u64))
}
