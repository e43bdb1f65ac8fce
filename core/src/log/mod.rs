//! The partition log: record batches, segments, indexes, the leader-epoch cache,
//! crash recovery, and the storage trait that all file access goes through.

pub mod batch;
mod checkpoint;
pub mod cleaner;
pub mod codec;
pub mod compaction;
pub mod crc;
pub mod epoch_cache;
/// Fuzz harness (tests/fuzz, node/tests/fuzz_smoke.rs); not an API.
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod fuzz;
pub mod partition_log;
mod segment;
pub mod storage;

pub use batch::*;
pub use cleaner::{Cleaner, CleanerInput, CleanerStats, CleanerStep};
pub use codec::{Codec, CodecError, CODEC_MASK};
pub use compaction::{CleanState, CompactionConfig};
pub use epoch_cache::{EpochCache, EpochEntry};
pub use partition_log::{
    AppendInfo, CleanableSegment, CorruptionReport, LogConfig, LogError, PartitionLog,
    RecoverySummary, RetentionSummary,
};
pub use segment::MAX_BATCH_LEN_ON_DISK;
pub use storage::{Storage, StorageError};
