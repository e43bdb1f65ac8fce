//! The partition log: record batches, segments, indexes, the leader-epoch cache,
//! crash recovery, and the storage trait that all file access goes through.

pub mod batch;

pub use batch::*;
