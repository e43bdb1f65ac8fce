//! The framed binary protocol spoken on every Skein TCP connection (brokers, controller,
//! clients). Byte layout in `docs/protocol.md`.
//!
//! A frame is a 16-byte header (magic, version, kind, flags, payload length, CRC32) and a
//! bincode payload whose type is named by `kind`. Decoding checks, in order: magic, version,
//! flags, length against the maximum (before reading or allocating the payload), the CRC,
//! the kind, and finally the payload itself; each failure is a typed [`FrameError`] so the
//! runtime can log why it closed a connection. Nothing here panics on any input.

use bincode::Options;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use skein_core::message::Message;
use skein_core::types::NodeId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// `SKNF` in ASCII.
pub const MAGIC: [u8; 4] = *b"SKNF";
/// The only protocol version this build speaks. Version 2: a replica `FetchResponse`
/// carries the leader's encoded batches as one byte string (version 1 sent decoded
/// `RecordBatch` structs), so a version-1 node must not read it. Version 3: a
/// `ProduceRequest` carries its batch encoded in the log's format, as one byte string
/// (version 2 sent a decoded `RecordBatch`), and `ProduceError` gained `CorruptBatch` and
/// `BatchTooLarge`.
pub const VERSION: u8 = 3;
pub const HEADER_LEN: usize = 16;
/// Default largest payload accepted (and sent): 16 MiB.
pub const DEFAULT_MAX_FRAME: u32 = 16 << 20;

/// Who opened a connection; the first frame on every connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    Node(NodeId),
    /// A controller, by its controller id (1 for a single controller).
    Controller(NodeId),
    /// A producer, consumer or admin tool; the receiver numbers it.
    Client,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub from: Peer,
}

/// Sent (best effort) just before a node closes a connection because of bad input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goodbye {
    pub reason: String,
}

/// A client asks a node for its metrics (`skein admin stats`); answered with
/// [`Frame::Stats`] on the same connection. Empty payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsRequest;

/// Everything that travels in a frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Hello(Hello),
    Goodbye(Goodbye),
    Msg(Message),
    /// Node-level, like Hello: answered by the runtime, not the state machine.
    StatsRequest,
    Stats(Box<crate::stats::StatsSnapshot>),
}

/// Frame kinds (header byte 5). Message kinds start at 16, in `Message` variant order.
pub mod kind {
    pub const HELLO: u8 = 0;
    pub const GOODBYE: u8 = 1;
    /// Node-level metrics (`skein admin stats`); kinds 2-15 are for such runtime frames.
    pub const STATS: u8 = 2;
    pub const STATS_RESPONSE: u8 = 3;
    pub const FETCH: u8 = 16;
    pub const FETCH_RESPONSE: u8 = 17;
    pub const PRODUCE: u8 = 18;
    pub const PRODUCE_RESPONSE: u8 = 19;
    pub const CONSUMER_FETCH: u8 = 20;
    pub const CONSUMER_FETCH_RESPONSE: u8 = 21;
    pub const METADATA: u8 = 22;
    pub const METADATA_RESPONSE: u8 = 23;
    pub const LIST_OFFSETS: u8 = 24;
    pub const LIST_OFFSETS_RESPONSE: u8 = 25;
    pub const CONTROLLER_REQUEST: u8 = 26;
    pub const CONTROLLER_RESPONSE: u8 = 27;
    // Added in place: kinds are never renumbered, so these follow the ones above.
    pub const GROUP: u8 = 28;
    pub const GROUP_RESPONSE: u8 = 29;
    /// Controller <-> controller Raft traffic (a quorum; the node runs one controller yet).
    pub const RAFT: u8 = 30;
    /// Replica <-> replica peer repair of a damaged batch.
    pub const REPAIR_FETCH: u8 = 31;
    pub const REPAIR_FETCH_RESPONSE: u8 = 32;
    /// Transactions: client/broker <-> transaction coordinator, coordinator -> leader.
    pub const TXN: u8 = 33;
    pub const TXN_RESPONSE: u8 = 34;
    pub const WRITE_TXN_MARKER: u8 = 35;
    pub const WRITE_TXN_MARKER_RESPONSE: u8 = 36;
}

/// Why bytes could not be read as a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad magic {found:02x?} (expected {MAGIC:02x?} \"SKNF\"): not a Skein peer")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported protocol version {found} (this node speaks {VERSION})")]
    UnsupportedVersion { found: u8 },
    #[error("unsupported frame flags {flags:#06x} (must be 0)")]
    UnsupportedFlags { flags: u16 },
    #[error("oversized frame: payload of {len} bytes exceeds the maximum of {max}")]
    Oversized { len: u32, max: u32 },
    #[error("truncated frame: needed {needed} bytes, got {got}")]
    Truncated { needed: usize, got: usize },
    #[error("CRC mismatch: header says {expected:#010x}, computed {computed:#010x}")]
    CrcMismatch { expected: u32, computed: u32 },
    #[error("unknown message type {kind}")]
    UnknownKind { kind: u8 },
    #[error("undecodable payload of message type {kind}: {reason}")]
    Undecodable { kind: u8, reason: String },
    #[error("connection error: {0}")]
    Io(String),
}

/// Why a frame could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("message of {len}+ bytes exceeds the maximum frame of {max}")]
    Oversized { len: u64, max: u32 },
    #[error("cannot serialize message: {0}")]
    Serialize(String),
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
}

fn options(max: u32) -> impl bincode::Options {
    // Varint integers, little endian, trailing bytes rejected, and a size limit so a
    // hostile length prefix inside the payload cannot make the decoder allocate much.
    bincode::DefaultOptions::new().with_limit(u64::from(max))
}

fn ser<T: Serialize>(v: &T, max: u32) -> Result<Vec<u8>, EncodeError> {
    options(max).serialize(v).map_err(|e| match *e {
        bincode::ErrorKind::SizeLimit => EncodeError::Oversized {
            len: u64::from(max) + 1,
            max,
        },
        other => EncodeError::Serialize(other.to_string()),
    })
}

fn de<T: DeserializeOwned>(kind: u8, payload: &[u8], max: u32) -> Result<T, FrameError> {
    options(max)
        .deserialize(payload)
        .map_err(|e| FrameError::Undecodable {
            kind,
            reason: e.to_string(),
        })
}

/// Kind byte and payload of a frame.
fn body(frame: &Frame, max: u32) -> Result<(u8, Vec<u8>), EncodeError> {
    use kind::*;
    Ok(match frame {
        Frame::Hello(h) => (HELLO, ser(h, max)?),
        Frame::Goodbye(g) => (GOODBYE, ser(g, max)?),
        Frame::StatsRequest => (STATS, ser(&StatsRequest, max)?),
        Frame::Stats(s) => (STATS_RESPONSE, ser(s.as_ref(), max)?),
        Frame::Msg(m) => match m {
            Message::Fetch(x) => (FETCH, ser(x, max)?),
            Message::FetchResponse(x) => (FETCH_RESPONSE, ser(x, max)?),
            Message::Produce(x) => (PRODUCE, ser(x, max)?),
            Message::ProduceResponse(x) => (PRODUCE_RESPONSE, ser(x, max)?),
            Message::ConsumerFetch(x) => (CONSUMER_FETCH, ser(x, max)?),
            Message::ConsumerFetchResponse(x) => (CONSUMER_FETCH_RESPONSE, ser(x, max)?),
            Message::Metadata(x) => (METADATA, ser(x, max)?),
            Message::MetadataResponse(x) => (METADATA_RESPONSE, ser(x, max)?),
            Message::ListOffsets(x) => (LIST_OFFSETS, ser(x, max)?),
            Message::ListOffsetsResponse(x) => (LIST_OFFSETS_RESPONSE, ser(x, max)?),
            Message::ControllerRequest(x) => (CONTROLLER_REQUEST, ser(x, max)?),
            Message::ControllerResponse(x) => (CONTROLLER_RESPONSE, ser(x, max)?),
            Message::Group {
                correlation,
                request,
            } => (GROUP, ser(&(correlation, request), max)?),
            Message::GroupResponse {
                correlation,
                response,
            } => (GROUP_RESPONSE, ser(&(correlation, response), max)?),
            Message::Raft(x) => (RAFT, ser(x, max)?),
            Message::RepairFetch(x) => (REPAIR_FETCH, ser(x, max)?),
            Message::RepairFetchResponse(x) => (REPAIR_FETCH_RESPONSE, ser(x, max)?),
            Message::Txn {
                correlation,
                request,
            } => (TXN, ser(&(correlation, request), max)?),
            Message::TxnResponse {
                correlation,
                response,
            } => (TXN_RESPONSE, ser(&(correlation, response), max)?),
            Message::WriteTxnMarker(x) => (WRITE_TXN_MARKER, ser(x, max)?),
            Message::WriteTxnMarkerResponse(x) => (WRITE_TXN_MARKER_RESPONSE, ser(x, max)?),
        },
    })
}

fn parse_body(kind: u8, p: &[u8], max: u32) -> Result<Frame, FrameError> {
    use kind::*;
    let m = |msg: Message| Ok(Frame::Msg(msg));
    match kind {
        HELLO => Ok(Frame::Hello(de(kind, p, max)?)),
        GOODBYE => Ok(Frame::Goodbye(de(kind, p, max)?)),
        STATS => {
            let StatsRequest = de(kind, p, max)?;
            Ok(Frame::StatsRequest)
        }
        STATS_RESPONSE => Ok(Frame::Stats(Box::new(de(kind, p, max)?))),
        FETCH => m(Message::Fetch(de(kind, p, max)?)),
        FETCH_RESPONSE => m(Message::FetchResponse(de(kind, p, max)?)),
        PRODUCE => m(Message::Produce(de(kind, p, max)?)),
        PRODUCE_RESPONSE => m(Message::ProduceResponse(de(kind, p, max)?)),
        CONSUMER_FETCH => m(Message::ConsumerFetch(de(kind, p, max)?)),
        CONSUMER_FETCH_RESPONSE => m(Message::ConsumerFetchResponse(de(kind, p, max)?)),
        METADATA => m(Message::Metadata(de(kind, p, max)?)),
        METADATA_RESPONSE => m(Message::MetadataResponse(de(kind, p, max)?)),
        LIST_OFFSETS => m(Message::ListOffsets(de(kind, p, max)?)),
        LIST_OFFSETS_RESPONSE => m(Message::ListOffsetsResponse(de(kind, p, max)?)),
        CONTROLLER_REQUEST => m(Message::ControllerRequest(de(kind, p, max)?)),
        CONTROLLER_RESPONSE => m(Message::ControllerResponse(de(kind, p, max)?)),
        GROUP => {
            let (correlation, request) = de(kind, p, max)?;
            m(Message::Group {
                correlation,
                request,
            })
        }
        GROUP_RESPONSE => {
            let (correlation, response) = de(kind, p, max)?;
            m(Message::GroupResponse {
                correlation,
                response,
            })
        }
        RAFT => m(Message::Raft(de(kind, p, max)?)),
        REPAIR_FETCH => m(Message::RepairFetch(de(kind, p, max)?)),
        REPAIR_FETCH_RESPONSE => m(Message::RepairFetchResponse(de(kind, p, max)?)),
        TXN => {
            let (correlation, request) = de(kind, p, max)?;
            m(Message::Txn {
                correlation,
                request,
            })
        }
        TXN_RESPONSE => {
            let (correlation, response) = de(kind, p, max)?;
            m(Message::TxnResponse {
                correlation,
                response,
            })
        }
        WRITE_TXN_MARKER => m(Message::WriteTxnMarker(de(kind, p, max)?)),
        WRITE_TXN_MARKER_RESPONSE => m(Message::WriteTxnMarkerResponse(de(kind, p, max)?)),
        other => Err(FrameError::UnknownKind { kind: other }),
    }
}

/// Header plus payload of an arbitrary kind (also used by tests to forge frames).
pub fn raw_frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    let crc = crc(&out[4..12], payload);
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn crc(header_fields: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header_fields);
    h.update(payload);
    h.finalize()
}

/// Encodes one frame; refuses payloads above `max`.
pub fn encode(frame: &Frame, max: u32) -> Result<Vec<u8>, EncodeError> {
    let (kind, payload) = body(frame, max)?;
    if payload.len() > max as usize {
        return Err(EncodeError::Oversized {
            len: payload.len() as u64,
            max,
        });
    }
    Ok(raw_frame(kind, &payload))
}

/// A parsed, not yet CRC-checked header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub len: u32,
    pub crc: u32,
}

/// Checks magic, version, flags and the length limit.
pub fn parse_header(h: &[u8; HEADER_LEN], max: u32) -> Result<Header, FrameError> {
    let found = [h[0], h[1], h[2], h[3]];
    if found != MAGIC {
        return Err(FrameError::BadMagic { found });
    }
    if h[4] != VERSION {
        return Err(FrameError::UnsupportedVersion { found: h[4] });
    }
    let flags = u16::from_be_bytes([h[6], h[7]]);
    if flags != 0 {
        return Err(FrameError::UnsupportedFlags { flags });
    }
    let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if len > max {
        return Err(FrameError::Oversized { len, max });
    }
    Ok(Header {
        kind: h[5],
        len,
        crc: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
    })
}

/// Verifies the CRC and decodes the payload of a parsed header.
pub fn decode_payload(
    h: &[u8; HEADER_LEN],
    header: Header,
    payload: &[u8],
    max: u32,
) -> Result<Frame, FrameError> {
    let computed = crc(&h[4..12], payload);
    if computed != header.crc {
        return Err(FrameError::CrcMismatch {
            expected: header.crc,
            computed,
        });
    }
    parse_body(header.kind, payload, max)
}

/// Decodes the frame at the start of `buf`, returning it and the bytes it used. A buffer
/// shorter than the frame is `Truncated`.
pub fn decode(buf: &[u8], max: u32) -> Result<(Frame, usize), FrameError> {
    let Some(h) = buf.get(..HEADER_LEN) else {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN,
            got: buf.len(),
        });
    };
    let h: &[u8; HEADER_LEN] = h.try_into().expect("sliced to HEADER_LEN");
    let header = parse_header(h, max)?;
    let total = HEADER_LEN + header.len as usize;
    let Some(payload) = buf.get(HEADER_LEN..total) else {
        return Err(FrameError::Truncated {
            needed: total,
            got: buf.len(),
        });
    };
    Ok((decode_payload(h, header, payload, max)?, total))
}

/// Reads one frame. `Ok(None)` on a clean end of stream between frames; an end of stream
/// inside a frame is `Truncated`.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: u32,
) -> Result<Option<Frame>, FrameError> {
    let mut h = [0u8; HEADER_LEN];
    let got = read_full(r, &mut h).await?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER_LEN {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN,
            got,
        });
    }
    let header = parse_header(&h, max)?;
    // Grow the buffer as bytes arrive rather than allocating the announced length up
    // front: a peer announcing 16 MiB and sending nothing costs nothing.
    let want = header.len as usize;
    let mut payload = Vec::with_capacity(want.min(64 << 10));
    (&mut *r)
        .take(want as u64)
        .read_to_end(&mut payload)
        .await
        .map_err(|e| FrameError::Io(e.to_string()))?;
    if payload.len() < want {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN + want,
            got: HEADER_LEN + payload.len(),
        });
    }
    decode_payload(&h, header, &payload, max).map(Some)
}

/// Fills `buf` unless the stream ends first; returns the bytes read.
async fn read_full<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<usize, FrameError> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]).await {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e.to_string())),
        }
    }
    Ok(at)
}

/// Encodes and writes one frame (not flushed).
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    frame: &Frame,
    max: u32,
) -> Result<(), EncodeError> {
    let bytes = encode(frame, max)?;
    w.write_all(&bytes).await?;
    Ok(())
}

/// Fuzz harness ([`crate::fuzzing`]); not an API.
pub(crate) mod fuzz;

#[cfg(test)]
mod tests;
