//! Array counts checked before the `kafka-protocol` decoder sees a frame.
//!
//! That decoder (0.18) sizes a `Vec` from an array's count as read off the wire
//! (`Vec::with_capacity(n)`), and a record batch's record and header counts likewise, before
//! decoding a single element. A 20-byte frame claiming 2^31 elements asks for hundreds of
//! GB; the allocation fails and Rust aborts the process: one bad client would kill the
//! broker (upstream: kafka-protocol-rs PRs 152, 161, 200, open). So every frame is first
//! walked here, by the request's layout at its version, and refused when a count exceeds
//! the bytes left (every element takes at least one byte, so such a frame is malformed).
//! This is why only the non-flexible versions are advertised (besides ApiVersions v3,
//! which has no arrays): their layouts are short enough to walk here.

use kafka_protocol::messages::ApiKey;

/// A count or a length that cannot fit, or a frame shorter than its layout.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GuardError(pub String);

struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Walk<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], GuardError> {
        if n > self.remaining() {
            return Err(GuardError(format!(
                "truncated: {n} bytes needed at {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn i16(&mut self) -> Result<i16, GuardError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, GuardError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn skip(&mut self, n: usize) -> Result<(), GuardError> {
        self.take(n).map(|_| ())
    }

    /// A (nullable) string: i16 length, -1 = null.
    fn string(&mut self) -> Result<(), GuardError> {
        match self.i16()? {
            -1 => Ok(()),
            n if n >= 0 => self.skip(n as usize),
            n => Err(GuardError(format!("string length {n}"))),
        }
    }

    /// (Nullable) bytes: i32 length, -1 = null. Returns them.
    fn bytes(&mut self) -> Result<&'a [u8], GuardError> {
        match self.i32()? {
            -1 => Ok(&[]),
            n if n >= 0 => self.take(n as usize),
            n => Err(GuardError(format!("bytes length {n}"))),
        }
    }

    /// A (nullable) array: i32 count, -1 = null, then `each` per element.
    fn array(
        &mut self,
        mut each: impl FnMut(&mut Self) -> Result<(), GuardError>,
    ) -> Result<(), GuardError> {
        let n = self.i32()?;
        if n < -1 || n as i64 > self.remaining() as i64 {
            return Err(GuardError(format!(
                "array count {n} with {} bytes left",
                self.remaining()
            )));
        }
        for _ in 0..n.max(0) {
            each(self)?;
        }
        Ok(())
    }

    /// Zigzag varint (record batch fields).
    fn varint(&mut self) -> Result<i64, GuardError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok((v >> 1) as i64 ^ -((v & 1) as i64));
            }
        }
        Err(GuardError("varint longer than 10 bytes".into()))
    }

    /// A varint length followed by that many bytes (-1: null).
    fn varbytes(&mut self) -> Result<(), GuardError> {
        match self.varint()? {
            -1 => Ok(()),
            n if n >= 0 => self.skip(usize::try_from(n).unwrap_or(usize::MAX)),
            n => Err(GuardError(format!("record field length {n}"))),
        }
    }
}

/// Checks the body (after the request header) of `api` at `version`.
pub fn check_body(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    let w = &mut Walk { buf: body, pos: 0 };
    match api {
        // ApiVersions v0-2: empty; v3: compact strings and tagged fields, no arrays.
        // InitProducerId v0-1: a nullable string and an i32.
        ApiKey::ApiVersions | ApiKey::InitProducerId => return Ok(()),
        ApiKey::Metadata => w.array(|w| w.string())?,
        ApiKey::Produce => {
            w.string()?; // transactional id
            w.skip(2 + 4)?; // acks, timeout
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.skip(4)?;
                    check_records(w.bytes()?)
                })
            })?;
        }
        ApiKey::Fetch => fetch(w, version)?,
        ApiKey::ListOffsets => {
            w.skip(4 + usize::from(version >= 2))?; // replica id, isolation level
            let partition = 4 + if version >= 4 { 4 } else { 0 } + 8;
            w.array(|w| {
                w.string()?;
                w.array(|w| w.skip(partition))
            })?;
        }
        ApiKey::CreateTopics => w.array(|w| {
            w.string()?;
            w.skip(4 + 2)?; // partitions, replication factor
            w.array(|w| {
                w.skip(4)?;
                w.array(|w| w.skip(4))
            })?;
            w.array(|w| {
                w.string()?;
                w.string()
            })
        })?,
        ApiKey::DeleteTopics => {
            w.array(|w| w.string())?;
            w.skip(4)?; // timeout
        }
        ApiKey::DescribeConfigs => {
            w.array(|w| {
                w.skip(1)?; // resource type
                w.string()?;
                w.array(|w| w.string()) // configuration keys (nullable)
            })?;
            // include_synonyms (v1+), include_documentation (v3+)
            w.skip(usize::from(version >= 1) + usize::from(version >= 3))?;
        }
        _ => return groups(w, api, version),
    }
    Ok(())
}

/// The transaction APIs (non-flexible versions, v0-2).
fn txn(w: &mut Walk, api: ApiKey, version: i16) -> Result<(), GuardError> {
    match api {
        ApiKey::AddPartitionsToTxn => {
            w.string()?; // transactional id
            w.skip(8 + 2)?; // producer id, epoch
            topic_partitions(w)?;
        }
        // Strings and numbers only.
        ApiKey::AddOffsetsToTxn | ApiKey::EndTxn => return Ok(()),
        ApiKey::TxnOffsetCommit => {
            w.string()?; // transactional id
            w.string()?; // group id
            w.skip(8 + 2)?; // producer id, epoch
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    // partition, offset, leader epoch (v2+)
                    w.skip(4 + 8 + if version >= 2 { 4 } else { 0 })?;
                    w.string() // metadata
                })
            })?;
        }
        _ => return Err(GuardError(format!("{api:?} has no layout here"))),
    }
    Ok(())
}

/// The consumer-group APIs (non-flexible versions). Subscription and assignment bytes
/// inside JoinGroup and SyncGroup are checked when they are translated
/// ([`check_subscription`], [`check_assignment`]).
fn groups(w: &mut Walk, api: ApiKey, version: i16) -> Result<(), GuardError> {
    match api {
        // key; key type (v1+): no arrays.
        ApiKey::FindCoordinator => return Ok(()),
        ApiKey::JoinGroup => {
            w.string()?; // group id
            w.skip(4 + if version >= 1 { 4 } else { 0 })?; // session, rebalance timeouts
            w.string()?; // member id
            if version >= 5 {
                w.string()?; // group instance id
            }
            w.string()?; // protocol type
            w.array(|w| {
                w.string()?;
                w.bytes().map(|_| ())
            })?;
        }
        ApiKey::SyncGroup => {
            w.string()?;
            w.skip(4)?; // generation
            w.string()?;
            if version >= 3 {
                w.string()?;
            }
            w.array(|w| {
                w.string()?;
                w.bytes().map(|_| ())
            })?;
        }
        // group id, generation, member id (, instance id): no arrays.
        ApiKey::Heartbeat => return Ok(()),
        ApiKey::LeaveGroup if version >= 3 => {
            w.string()?;
            w.array(|w| {
                w.string()?;
                w.string()
            })?;
        }
        ApiKey::LeaveGroup => return Ok(()),
        ApiKey::OffsetCommit => {
            w.string()?;
            w.skip(4)?; // generation
            w.string()?; // member id
            if version >= 7 {
                w.string()?;
            }
            if version <= 4 {
                w.skip(8)?; // retention time
            }
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.skip(4 + 8 + if version >= 6 { 4 } else { 0 })?;
                    w.string() // metadata
                })
            })?;
        }
        ApiKey::OffsetFetch => {
            w.string()?;
            w.array(|w| {
                w.string()?;
                w.array(|w| w.skip(4))
            })?;
        }
        // ListGroups v0-2: an empty body.
        ApiKey::ListGroups => return Ok(()),
        ApiKey::DescribeGroups => {
            w.array(|w| w.string())?;
            w.skip(usize::from(version >= 3))?; // include authorized operations
        }
        ApiKey::DeleteGroups => w.array(|w| w.string())?,
        ApiKey::OffsetDelete => {
            w.string()?;
            w.array(|w| {
                w.string()?;
                w.array(|w| w.skip(4))
            })?;
        }
        _ => return txn(w, api, version),
    }
    Ok(())
}

/// Kafka's ConsumerProtocol subscription (JoinGroup metadata): i16 version, topics,
/// user data, owned partitions (v1+), generation (v2+), rack (v3+). Returns the version.
pub fn check_subscription(bytes: &[u8]) -> Result<i16, GuardError> {
    let w = &mut Walk { buf: bytes, pos: 0 };
    let version = w.i16()?;
    if version < 0 {
        return Err(GuardError(format!("subscription version {version}")));
    }
    w.array(|w| w.string())?;
    w.bytes()?;
    if version >= 1 {
        topic_partitions(w)?;
    }
    Ok(version)
}

/// Kafka's ConsumerProtocol assignment (SyncGroup): i16 version, partitions, user data.
pub fn check_assignment(bytes: &[u8]) -> Result<i16, GuardError> {
    let w = &mut Walk { buf: bytes, pos: 0 };
    let version = w.i16()?;
    if version < 0 {
        return Err(GuardError(format!("assignment version {version}")));
    }
    topic_partitions(w)?;
    Ok(version)
}

fn topic_partitions(w: &mut Walk) -> Result<(), GuardError> {
    w.array(|w| {
        w.string()?;
        w.array(|w| w.skip(4))
    })
}

fn fetch(w: &mut Walk, version: i16) -> Result<(), GuardError> {
    // replica id, max wait, min bytes, max bytes, isolation; session id and epoch (v7+)
    w.skip(4 * 4 + 1 + if version >= 7 { 8 } else { 0 })?;
    let partition = 4 + if version >= 9 { 4 } else { 0 } + 8 + if version >= 5 { 8 } else { 0 } + 4;
    w.array(|w| {
        w.string()?;
        w.array(|w| w.skip(partition))
    })?;
    if version >= 7 {
        w.array(|w| {
            w.string()?;
            w.array(|w| w.skip(4))
        })?;
    }
    Ok(())
}

/// Checks a produce request's record batches (v2, uncompressed): every batch fits, and
/// no record or header count exceeds the bytes left.
pub fn check_records(records: &[u8]) -> Result<(), GuardError> {
    /// Base offset and batch length, then the rest of the 61-byte header.
    const HEADER: usize = 61;
    let w = &mut Walk {
        buf: records,
        pos: 0,
    };
    while w.remaining() > 0 {
        let start = w.pos;
        w.skip(8)?;
        let len = w.i32()?;
        if len < (HEADER - 12) as i32 {
            return Err(GuardError(format!("record batch length {len}")));
        }
        w.pos = start;
        let batch = w.take(12 + len as usize)?;
        let b = &mut Walk { buf: batch, pos: 0 };
        b.skip(16)?;
        let magic = b.take(1)?[0];
        b.skip(4)?; // crc
        let attributes = b.i16()?;
        if magic != 2 || attributes & 0x7 != 0 {
            // The decoder refuses other versions before reading any record; a compressed
            // batch's records are checked once decompressed (records::decode_batches).
            continue;
        }
        b.pos = HEADER - 4;
        let count = b.i32()?;
        if count < 0 || count as usize > b.remaining() {
            return Err(GuardError(format!(
                "record count {count} with {} bytes left",
                b.remaining()
            )));
        }
        for _ in 0..count {
            let len = b.varint()?;
            let rec =
                b.take(usize::try_from(len).map_err(|_| GuardError("record length".into()))?)?;
            let r = &mut Walk { buf: rec, pos: 0 };
            r.skip(1)?; // attributes
            r.varint()?; // timestamp delta
            r.varint()?; // offset delta
            r.varbytes()?; // key
            r.varbytes()?; // value
            let headers = r.varint()?;
            if headers < 0 || headers as u64 > r.remaining() as u64 {
                return Err(GuardError(format!("header count {headers}")));
            }
        }
    }
    Ok(())
}
