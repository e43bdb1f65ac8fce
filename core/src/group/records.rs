//! Key/value encodings of the records a coordinator writes to `__consumer_offsets`.
//!
//! Every record has a key naming *what* it describes and a value holding its latest state;
//! a `None` value is a tombstone (delete). Reading the partition back keeps the latest
//! value per key (see [`latest_per_key`]), which is also exactly what log compaction may
//! keep. Layout (all integers big-endian; `str` = u32 length + UTF-8 bytes;
//! `opt<T>` = u8 0/1 + T):
//!
//! ```text
//! offset key   : u16 version=1 | str group | str topic | u32 partition
//! group key    : u16 version=2 | str group
//! barrier key  : u16 version=3                 (value always absent; see below)
//! offset value : u16 version=1 | u64 offset | opt<u32> leader_epoch | str metadata
//!                | opt<stamp>
//! stamp        : str member_id | u32 generation | u64 sequence   (who committed, and when)
//! group value  : u16 version=1 | str protocol_type | u32 generation | opt<str> protocol
//!                | opt<str> leader | u32 n | n x member
//! member       : str member_id | opt<str> instance_id | u64 session_timeout_ns
//!                | u64 rebalance_timeout_ns | u32 t | t x str topic
//!                | u32 a | a x (str topic | u32 partition)
//! ```
//! Versions are the first two bytes so a future format can be told apart; an unknown key
//! version is skipped on load (written by a newer coordinator), a malformed record is an error.
//!
//! A *barrier* record carries nothing: a coordinator appends one (acks=all) before it answers
//! an OffsetFetch, so that only a leader the in-sync replicas still follow answers reads (a
//! deposed leader cut off from the controller cannot get it past its HW). Load skips it;
//! having no value, it is a tombstone, so compaction drops it.

use crate::byte_reader::{ByteReader, ReadError};
use crate::group::protocol::{GenerationId, GroupId, InstanceId, MemberId, OffsetAndMetadata};
use crate::log::{Record, RecordBatch};
use crate::types::{Nanos, Offset, TopicPartition};
use std::collections::BTreeMap;

const OFFSET_KEY_VERSION: u16 = 1;
const GROUP_KEY_VERSION: u16 = 2;
const BARRIER_KEY_VERSION: u16 = 3;
const OFFSET_VALUE_VERSION: u16 = 1;
const GROUP_VALUE_VERSION: u16 = 1;

/// What a record of `__consumer_offsets` is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    Offset {
        group: GroupId,
        tp: TopicPartition,
    },
    Group {
        group: GroupId,
    },
    /// A read barrier: about no group.
    Barrier,
}

impl RecordKey {
    /// The group the record is about (none for a barrier).
    pub fn group(&self) -> Option<&str> {
        match self {
            RecordKey::Offset { group, .. } | RecordKey::Group { group } => Some(group),
            RecordKey::Barrier => None,
        }
    }
}

/// Which member commit wrote an offset: lets a coordinator (also after a failover) refuse an
/// older commit of the same member that the network delivered late.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitStamp {
    pub member_id: MemberId,
    pub generation: GenerationId,
    pub sequence: u64,
}

/// One member as persisted in a group-metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedMember {
    pub member_id: MemberId,
    pub instance_id: Option<InstanceId>,
    pub session_timeout: Nanos,
    pub rebalance_timeout: Nanos,
    pub topics: Vec<String>,
    pub assignment: Vec<TopicPartition>,
}

/// The durable part of a group: enough to fence zombies and keep members after failover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: GenerationId,
    pub protocol: Option<String>,
    pub leader: Option<MemberId>,
    pub members: Vec<PersistedMember>,
}

/// A decoded record of `__consumer_offsets`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRecord {
    Offset {
        group: GroupId,
        tp: TopicPartition,
        value: Option<OffsetAndMetadata>,
        /// Absent for admin commits and tombstones.
        stamp: Option<CommitStamp>,
    },
    Group {
        group: GroupId,
        value: Option<GroupMetadataValue>,
    },
    /// A read barrier (nothing to load).
    Barrier,
}

/// A record of `__consumer_offsets` that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record has no key")]
    MissingKey,
    #[error("record truncated while reading {0}")]
    Truncated(&'static str),
    #[error("{0} is not valid UTF-8")]
    BadUtf8(&'static str),
    #[error("unknown key version {0}")]
    UnknownKeyVersion(u16),
    #[error("unknown value version {version} for {what}")]
    UnknownValueVersion { what: &'static str, version: u16 },
    #[error("{0} trailing bytes after the {1}")]
    TrailingBytes(usize, &'static str),
    #[error("bad option tag {0} in {1}")]
    BadOptionTag(u8, &'static str),
}

// ---- encoding ---------------------------------------------------------------------------

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s)
            }
        }
    }
}

/// Room for a usual key or offset value, allocated once (a commit writes one of each per
/// partition; growing from empty reallocated three or four times): a longer one still grows.
const KEY_CAPACITY: usize = 64;
const OFFSET_VALUE_CAPACITY: usize = 128;

pub fn encode_key(key: &RecordKey) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(KEY_CAPACITY));
    match key {
        RecordKey::Offset { group, tp } => {
            w.u16(OFFSET_KEY_VERSION);
            w.str(group);
            w.str(&tp.topic);
            w.u32(tp.partition);
        }
        RecordKey::Group { group } => {
            w.u16(GROUP_KEY_VERSION);
            w.str(group);
        }
        RecordKey::Barrier => w.u16(BARRIER_KEY_VERSION),
    }
    w.0
}

pub fn encode_offset_value(v: &OffsetAndMetadata, stamp: Option<&CommitStamp>) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(OFFSET_VALUE_CAPACITY));
    w.u16(OFFSET_VALUE_VERSION);
    w.u64(v.offset);
    match v.leader_epoch {
        None => w.u8(0),
        Some(e) => {
            w.u8(1);
            w.u32(e)
        }
    }
    w.str(&v.metadata);
    match stamp {
        None => w.u8(0),
        Some(s) => {
            w.u8(1);
            w.str(&s.member_id);
            w.u32(s.generation);
            w.u64(s.sequence);
        }
    }
    w.0
}

pub fn encode_group_value(v: &GroupMetadataValue) -> Vec<u8> {
    let mut w = W(Vec::new());
    w.u16(GROUP_VALUE_VERSION);
    w.str(&v.protocol_type);
    w.u32(v.generation);
    w.opt_str(v.protocol.as_deref());
    w.opt_str(v.leader.as_deref());
    w.u32(v.members.len() as u32);
    for m in &v.members {
        w.str(&m.member_id);
        w.opt_str(m.instance_id.as_deref());
        w.u64(m.session_timeout);
        w.u64(m.rebalance_timeout);
        w.u32(m.topics.len() as u32);
        for t in &m.topics {
            w.str(t);
        }
        w.u32(m.assignment.len() as u32);
        for tp in &m.assignment {
            w.str(&tp.topic);
            w.u32(tp.partition);
        }
    }
    w.0
}

fn record(key: Vec<u8>, value: Option<Vec<u8>>) -> Record {
    Record::new(0, Some(key), value)
}

/// The record storing (or, with `None`, deleting) a committed offset.
pub fn offset_record(
    group: &str,
    tp: &TopicPartition,
    value: Option<&OffsetAndMetadata>,
    stamp: Option<&CommitStamp>,
) -> Record {
    let key = encode_key(&RecordKey::Offset {
        group: group.to_string(),
        tp: tp.clone(),
    });
    record(key, value.map(|v| encode_offset_value(v, stamp)))
}

/// The record storing (or, with `None`, deleting) a group's metadata.
pub fn group_record(group: &str, value: Option<&GroupMetadataValue>) -> Record {
    let key = encode_key(&RecordKey::Group {
        group: group.to_string(),
    });
    record(key, value.map(encode_group_value))
}

/// A read barrier (see the module docs).
pub fn barrier_record() -> Record {
    record(encode_key(&RecordKey::Barrier), None)
}

/// Number the records of an effect consecutively, as they will sit in one batch.
pub fn number_records(records: &mut [Record]) {
    for (i, r) in records.iter_mut().enumerate() {
        r.offset_delta = i as u32;
    }
}

// ---- decoding ---------------------------------------------------------------------------

impl From<ReadError> for RecordError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated(w) => RecordError::Truncated(w),
            ReadError::BadUtf8(w) => RecordError::BadUtf8(w),
            ReadError::BadOptionTag(t, w) => RecordError::BadOptionTag(t, w),
            ReadError::TrailingBytes(n, w) => RecordError::TrailingBytes(n, w),
        }
    }
}

pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = ByteReader::new(bytes);
    let key = match r.u16("key version")? {
        OFFSET_KEY_VERSION => RecordKey::Offset {
            group: r.str("offset key group")?,
            tp: TopicPartition {
                topic: r.str("offset key topic")?,
                partition: r.u32("offset key partition")?,
            },
        },
        GROUP_KEY_VERSION => RecordKey::Group {
            group: r.str("group key group")?,
        },
        BARRIER_KEY_VERSION => RecordKey::Barrier,
        v => return Err(RecordError::UnknownKeyVersion(v)),
    };
    r.finish("key")?;
    Ok(key)
}

pub fn decode_offset_value(
    bytes: &[u8],
) -> Result<(OffsetAndMetadata, Option<CommitStamp>), RecordError> {
    let mut r = ByteReader::new(bytes);
    let version = r.u16("offset value version")?;
    if version != OFFSET_VALUE_VERSION {
        return Err(RecordError::UnknownValueVersion {
            what: "offset value",
            version,
        });
    }
    let offset = r.u64("offset")?;
    let leader_epoch = match r.u8("leader epoch")? {
        0 => None,
        1 => Some(r.u32("leader epoch")?),
        t => return Err(RecordError::BadOptionTag(t, "leader epoch")),
    };
    let metadata = r.str("offset metadata")?;
    let stamp = match r.u8("commit stamp")? {
        0 => None,
        1 => Some(CommitStamp {
            member_id: r.str("stamp member id")?,
            generation: r.u32("stamp generation")?,
            sequence: r.u64("stamp sequence")?,
        }),
        t => return Err(RecordError::BadOptionTag(t, "commit stamp")),
    };
    r.finish("offset value")?;
    Ok((
        OffsetAndMetadata {
            offset,
            leader_epoch,
            metadata,
        },
        stamp,
    ))
}

pub fn decode_group_value(bytes: &[u8]) -> Result<GroupMetadataValue, RecordError> {
    let mut r = ByteReader::new(bytes);
    let version = r.u16("group value version")?;
    if version != GROUP_VALUE_VERSION {
        return Err(RecordError::UnknownValueVersion {
            what: "group value",
            version,
        });
    }
    let protocol_type = r.str("protocol type")?;
    let generation = r.u32("generation")?;
    let protocol = r.opt("protocol", |r| r.str("protocol"))?;
    let leader = r.opt("leader", |r| r.str("leader"))?;
    let n = r.count(4 + 1 + 16 + 8, "member count")?;
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let member_id = r.str("member id")?;
        let instance_id = r.opt("instance id", |r| r.str("instance id"))?;
        let session_timeout = r.u64("session timeout")?;
        let rebalance_timeout = r.u64("rebalance timeout")?;
        let t = r.count(4, "topic count")?;
        let mut topics = Vec::with_capacity(t);
        for _ in 0..t {
            topics.push(r.str("subscribed topic")?);
        }
        let a = r.count(8, "assignment count")?;
        let mut assignment = Vec::with_capacity(a);
        for _ in 0..a {
            assignment.push(TopicPartition {
                topic: r.str("assigned topic")?,
                partition: r.u32("assigned partition")?,
            });
        }
        members.push(PersistedMember {
            member_id,
            instance_id,
            session_timeout,
            rebalance_timeout,
            topics,
            assignment,
        });
    }
    r.finish("group value")?;
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        members,
    })
}

/// Decode one record. `Ok(None)`: a key version this coordinator does not know (written by
/// a newer one), skipped rather than misread.
pub fn decode_record(record: &Record) -> Result<Option<GroupRecord>, RecordError> {
    let key_bytes = record.key.as_deref().ok_or(RecordError::MissingKey)?;
    let key = match decode_key(key_bytes) {
        Ok(k) => k,
        Err(RecordError::UnknownKeyVersion(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(match key {
        RecordKey::Offset { group, tp } => {
            let decoded = record
                .value
                .as_deref()
                .map(decode_offset_value)
                .transpose()?;
            let (value, stamp) = match decoded {
                Some((v, s)) => (Some(v), s),
                None => (None, None),
            };
            GroupRecord::Offset {
                group,
                tp,
                value,
                stamp,
            }
        }
        RecordKey::Group { group } => GroupRecord::Group {
            group,
            value: record
                .value
                .as_deref()
                .map(decode_group_value)
                .transpose()?,
        },
        RecordKey::Barrier => GroupRecord::Barrier,
    }))
}

/// Log compaction's view of `__consumer_offsets`: for every key, the offset and record of
/// its latest write; keys whose latest write is a tombstone are dropped. Loading the result
/// rebuilds the same state as loading every batch (tested), so a compacted partition is a
/// valid input to [`crate::group::GroupCoordinator::load`]. Records without a key cannot be
/// compacted and are reported as an error.
pub fn latest_per_key(batches: &[RecordBatch]) -> Result<Vec<(Offset, Record)>, RecordError> {
    let mut latest: BTreeMap<Vec<u8>, (Offset, &Record)> = BTreeMap::new();
    for b in batches {
        for (offset, r) in b.iter_offsets() {
            let key = r.key.clone().ok_or(RecordError::MissingKey)?;
            latest.insert(key, (offset, r));
        }
    }
    let mut kept: Vec<(Offset, Record)> = latest
        .into_values()
        .filter(|(_, r)| r.value.is_some())
        .map(|(o, r)| (o, r.clone()))
        .collect();
    kept.sort_by_key(|(o, _)| *o);
    Ok(kept)
}

/// Re-batch compacted records (one record per batch, keeping its offset) so they can be
/// handed to a loader or written to a compacted segment.
pub fn batches_from_records(records: Vec<(Offset, Record)>) -> Vec<RecordBatch> {
    records
        .into_iter()
        .map(|(offset, mut r)| {
            r.offset_delta = 0;
            RecordBatch::of_records(0, vec![r]).at(offset)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_group() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            members: vec![PersistedMember {
                member_id: "m-1".into(),
                instance_id: Some("i".into()),
                session_timeout: 10,
                rebalance_timeout: 20,
                topics: vec!["t".into()],
                assignment: vec![TopicPartition::new("t", 3)],
            }],
        }
    }

    #[test]
    fn round_trips() {
        let g = sample_group();
        let r = group_record("g", Some(&g));
        assert_eq!(
            decode_record(&r).unwrap(),
            Some(GroupRecord::Group {
                group: "g".into(),
                value: Some(g)
            })
        );
        let o = OffsetAndMetadata {
            offset: 42,
            leader_epoch: Some(3),
            metadata: "m".into(),
        };
        let tp = TopicPartition::new("t", 1);
        let stamp = CommitStamp {
            member_id: "m-1".into(),
            generation: 4,
            sequence: 9,
        };
        for st in [None, Some(stamp)] {
            let r = offset_record("g", &tp, Some(&o), st.as_ref());
            assert_eq!(
                decode_record(&r).unwrap(),
                Some(GroupRecord::Offset {
                    group: "g".into(),
                    tp: tp.clone(),
                    value: Some(o.clone()),
                    stamp: st,
                })
            );
        }
        let t = offset_record("g", &tp, None, None);
        assert!(matches!(
            decode_record(&t).unwrap(),
            Some(GroupRecord::Offset { value: None, .. })
        ));
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let bytes = encode_group_value(&sample_group());
        for n in 0..bytes.len() {
            assert!(decode_group_value(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            decode_group_value(&long),
            Err(RecordError::TrailingBytes(1, "group value"))
        );
        let key = encode_key(&RecordKey::Group { group: "g".into() });
        for n in 0..key.len() {
            assert!(decode_key(&key[..n]).is_err());
        }
    }

    #[test]
    fn unknown_key_version_is_skipped_missing_key_is_error() {
        let mut r = group_record("g", None);
        r.key = Some(vec![0, 99, 1, 2]);
        assert_eq!(decode_record(&r), Ok(None));
        r.key = None;
        assert_eq!(decode_record(&r), Err(RecordError::MissingKey));
    }

    #[test]
    fn compaction_keeps_latest_and_drops_tombstones() {
        let tp = TopicPartition::new("t", 0);
        let mut recs = vec![
            offset_record("g", &tp, Some(&OffsetAndMetadata::new(1)), None),
            offset_record("g", &tp, Some(&OffsetAndMetadata::new(5)), None),
            offset_record("h", &tp, Some(&OffsetAndMetadata::new(9)), None),
            offset_record("h", &tp, None, None),
        ];
        number_records(&mut recs);
        let batch = RecordBatch::of_records(0, recs).at(100);
        let kept = latest_per_key(&[batch]).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0, 101);
        assert_eq!(
            decode_offset_value(kept[0].1.value.as_deref().unwrap())
                .unwrap()
                .0
                .offset,
            5
        );
    }
}
