//! Key/value encoding of the records a transaction coordinator writes to
//! `__transaction_state` (Kafka's `TransactionLog`).
//!
//! One key per transactional id; the value is the id's whole [`TxnMetadata`] as of the
//! write, so the latest value per key is the id's state (what compaction keeps and what a
//! loading coordinator rebuilds). A `None` value is a tombstone (the id is gone).
//! Layout (big-endian; `str` = u32 length + UTF-8; `opt<T>` = u8 0/1 + T):
//!
//! ```text
//! key   : u16 version=1 | str transactional_id
//! value : u16 version=2 | u64 producer_id | u16 producer_epoch | opt<u16> last_producer_epoch
//!         | u32 timeout_ms | u8 state | u64 start_time_ns | u32 n | n x (str topic | u32 partition)
//!         | u8 bumped
//! ```
//! Version 1 (no `bumped` byte, read as false) is still read.
//! An unknown key version is skipped on load (written by a newer coordinator); anything
//! else malformed is an error, as for `__consumer_offsets`.

use crate::byte_reader::{ByteReader, ReadError};
use crate::log::{Record, RecordBatch};
use crate::txn::state::{TxnMetadata, TxnState};
use crate::types::{Offset, TopicPartition};
use std::collections::BTreeMap;

const KEY_VERSION: u16 = 1;
const VALUE_VERSION: u16 = 2;
/// The value layout before `bumped` (KIP-890 part 2's marker flag) was added.
const VALUE_VERSION_1: u16 = 1;

/// A `__transaction_state` record that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnRecordError {
    #[error("record has no key")]
    MissingKey,
    #[error("record truncated while reading {0}")]
    Truncated(&'static str),
    #[error("{0} is not valid UTF-8")]
    BadUtf8(&'static str),
    #[error("unknown value version {0}")]
    UnknownValueVersion(u16),
    #[error("unknown transaction state code {0}")]
    UnknownState(u8),
    #[error("bad option tag {0} in {1}")]
    BadOptionTag(u8, &'static str),
    #[error("{0} trailing bytes after the {1}")]
    TrailingBytes(usize, &'static str),
}

/// A decoded record: the id and its metadata (`None`: tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub value: Option<TxnMetadata>,
}

fn state_code(s: TxnState) -> u8 {
    match s {
        TxnState::Empty => 0,
        TxnState::Ongoing => 1,
        TxnState::PrepareCommit => 2,
        TxnState::PrepareAbort => 3,
        TxnState::CompleteCommit => 4,
        TxnState::CompleteAbort => 5,
        TxnState::Dead => 6,
        TxnState::PrepareEpochFence => 7,
    }
}

fn state_of(code: u8) -> Result<TxnState, TxnRecordError> {
    Ok(match code {
        0 => TxnState::Empty,
        1 => TxnState::Ongoing,
        2 => TxnState::PrepareCommit,
        3 => TxnState::PrepareAbort,
        4 => TxnState::CompleteCommit,
        5 => TxnState::CompleteAbort,
        6 => TxnState::Dead,
        7 => TxnState::PrepareEpochFence,
        c => return Err(TxnRecordError::UnknownState(c)),
    })
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_str(&mut out, transactional_id);
    out
}

pub fn encode_value(m: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&m.producer_id.to_be_bytes());
    out.extend_from_slice(&m.producer_epoch.to_be_bytes());
    match m.last_producer_epoch {
        None => out.push(0),
        Some(e) => {
            out.push(1);
            out.extend_from_slice(&e.to_be_bytes());
        }
    }
    out.extend_from_slice(&m.timeout_ms.to_be_bytes());
    out.push(state_code(m.state));
    out.extend_from_slice(&m.start_time.to_be_bytes());
    out.extend_from_slice(&(m.partitions.len() as u32).to_be_bytes());
    for tp in &m.partitions {
        put_str(&mut out, &tp.topic);
        out.extend_from_slice(&tp.partition.to_be_bytes());
    }
    out.push(u8::from(m.bumped));
    out
}

/// The record storing (or, with `None`, deleting) `transactional_id`'s metadata.
pub fn txn_record(transactional_id: &str, value: Option<&TxnMetadata>) -> Record {
    Record::new(
        0,
        Some(encode_key(transactional_id)),
        value.map(encode_value),
    )
}

impl From<ReadError> for TxnRecordError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated(w) => TxnRecordError::Truncated(w),
            ReadError::BadUtf8(w) => TxnRecordError::BadUtf8(w),
            ReadError::BadOptionTag(t, w) => TxnRecordError::BadOptionTag(t, w),
            ReadError::TrailingBytes(n, w) => TxnRecordError::TrailingBytes(n, w),
        }
    }
}

/// The transactional id of a key; `Ok(None)` for a key version this coordinator does not
/// know (skipped, not misread).
pub fn decode_key(bytes: &[u8]) -> Result<Option<String>, TxnRecordError> {
    let mut r = ByteReader::new(bytes);
    if r.u16("key version")? != KEY_VERSION {
        return Ok(None);
    }
    let id = r.str("transactional id")?;
    r.finish("key")?;
    Ok(Some(id))
}

pub fn decode_value(bytes: &[u8]) -> Result<TxnMetadata, TxnRecordError> {
    let mut r = ByteReader::new(bytes);
    let version = r.u16("value version")?;
    if version != VALUE_VERSION && version != VALUE_VERSION_1 {
        return Err(TxnRecordError::UnknownValueVersion(version));
    }
    let producer_id = r.u64("producer id")?;
    let producer_epoch = r.u16("producer epoch")?;
    let last_producer_epoch = r.opt("last producer epoch", |r| r.u16("last producer epoch"))?;
    let timeout_ms = r.u32("timeout")?;
    let state = state_of(r.u8("state")?)?;
    let start_time = r.u64("start time")?;
    // Each partition takes at least 8 bytes: a corrupt huge count fails before allocating.
    let n = r.count(8, "partitions")?;
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..n {
        let topic = r.str("partition topic")?;
        let partition = r.u32("partition")?;
        partitions.insert(TopicPartition { topic, partition });
    }
    let bumped = version != VALUE_VERSION_1 && r.u8("bumped")? != 0;
    r.finish("value")?;
    Ok(TxnMetadata {
        producer_id,
        producer_epoch,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        start_time,
        bumped,
    })
}

/// Decode one record; `Ok(None)` for an unknown key version.
pub fn decode_record(record: &Record) -> Result<Option<TxnRecord>, TxnRecordError> {
    let key = record.key.as_deref().ok_or(TxnRecordError::MissingKey)?;
    let Some(transactional_id) = decode_key(key)? else {
        return Ok(None);
    };
    let value = record.value.as_deref().map(decode_value).transpose()?;
    Ok(Some(TxnRecord {
        transactional_id,
        value,
    }))
}

/// The state `batches` leave behind: the latest value per transactional id (tombstoned ids
/// dropped), with the offset of that write. Unknown key versions are skipped.
pub fn latest_per_id(
    batches: &[RecordBatch],
) -> Result<BTreeMap<String, (Offset, TxnMetadata)>, (Offset, TxnRecordError)> {
    let mut latest: BTreeMap<String, (Offset, Option<TxnMetadata>)> = BTreeMap::new();
    for b in batches {
        for (offset, r) in b.iter_offsets() {
            if let Some(rec) = decode_record(r).map_err(|e| (offset, e))? {
                latest.insert(rec.transactional_id, (offset, rec.value));
            }
        }
    }
    Ok(latest
        .into_iter()
        .filter_map(|(id, (o, v))| v.map(|v| (id, (o, v))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn sample(state: TxnState) -> TxnMetadata {
        TxnMetadata {
            producer_id: 42,
            producer_epoch: 7,
            last_producer_epoch: Some(6),
            timeout_ms: 60_000,
            state,
            partitions: BTreeSet::from([
                TopicPartition::new("a", 0),
                TopicPartition::new("__consumer_offsets", 3),
            ]),
            start_time: 123_456_789,
            bumped: state == TxnState::PrepareCommit,
        }
    }

    #[test]
    fn every_state_round_trips() {
        for state in [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::PrepareAbort,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
            TxnState::PrepareEpochFence,
            TxnState::Dead,
        ] {
            let m = sample(state);
            let rec = txn_record("t-1", Some(&m));
            assert_eq!(
                decode_record(&rec).unwrap(),
                Some(TxnRecord {
                    transactional_id: "t-1".into(),
                    value: Some(m)
                })
            );
        }
        let mut m = sample(TxnState::Empty);
        m.last_producer_epoch = None;
        m.partitions.clear();
        assert_eq!(decode_value(&encode_value(&m)).unwrap(), m);
    }

    /// A value written before the `bumped` byte existed still loads (as unbumped).
    #[test]
    fn a_version_1_value_loads_as_unbumped() {
        let m = sample(TxnState::PrepareCommit);
        assert!(m.bumped);
        let mut v1 = encode_value(&m);
        assert_eq!(v1.pop(), Some(1));
        v1[..2].copy_from_slice(&VALUE_VERSION_1.to_be_bytes());
        let back = decode_value(&v1).unwrap();
        assert_eq!(back, TxnMetadata { bumped: false, ..m });
    }

    #[test]
    fn latest_value_per_id_wins_and_tombstones_drop() {
        let recs = vec![
            txn_record("a", Some(&sample(TxnState::Ongoing))),
            txn_record("b", Some(&sample(TxnState::Empty))),
            txn_record("a", Some(&sample(TxnState::PrepareCommit))),
            txn_record("b", None),
        ];
        let batches: Vec<RecordBatch> = recs
            .into_iter()
            .enumerate()
            .map(|(i, r)| RecordBatch::of_records(0, vec![r]).at(i as u64))
            .collect();
        let latest = latest_per_id(&batches).unwrap();
        assert_eq!(latest.len(), 1);
        assert_eq!(latest["a"], (2, sample(TxnState::PrepareCommit)));
    }

    #[test]
    fn malformed_records_are_errors_and_unknown_keys_skipped() {
        let mut bad = txn_record("a", Some(&sample(TxnState::Ongoing)));
        bad.value.as_mut().unwrap().truncate(10);
        assert!(matches!(
            decode_record(&bad),
            Err(TxnRecordError::Truncated(_))
        ));
        let mut unknown_state = encode_value(&sample(TxnState::Ongoing));
        unknown_state[2 + 8 + 2 + 3 + 4] = 99;
        assert_eq!(
            decode_value(&unknown_state),
            Err(TxnRecordError::UnknownState(99))
        );
        let future = Record::new(0, Some(vec![0, 9, 1]), Some(vec![1]));
        assert_eq!(decode_record(&future), Ok(None));
        assert_eq!(
            decode_record(&Record::new(0, None, None)),
            Err(TxnRecordError::MissingKey)
        );
        let mut trailing = encode_value(&sample(TxnState::Empty));
        trailing.push(0);
        assert!(matches!(
            decode_value(&trailing),
            Err(TxnRecordError::TrailingBytes(1, _))
        ));
    }
}
