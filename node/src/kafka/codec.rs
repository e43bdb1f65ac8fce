//! Kafka framing and request decoding: a 4-byte big-endian size, then a request header
//! (api key, version, correlation id, client id; tagged fields in the flexible header) and
//! the body. Decoding is a pure function of the frame's bytes ([`decode_request`]) so a
//! property test can feed it anything; every way it can fail is a [`CodecError`], which
//! closes the connection (Kafka brokers do the same: there is no error response for a
//! request that cannot be parsed).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest,
    CreateTopicsRequest, DeleteGroupsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("frame size {0} is negative or below the 8-byte request header minimum")]
    BadLength(i32),
    #[error("frame size {size} exceeds the limit {max}")]
    TooLarge { size: i32, max: u32 },
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// A Kafka API Skein does not serve: Kafka too closes the connection for an API it
    /// does not enable (only ApiVersions has an answer for what it does not support).
    #[error("{0:?} (api key {k}) is not served here (see ApiVersions)", k = *.0 as i16)]
    UnsupportedApi(ApiKey),
    #[error("{api:?} v{version} is not supported (see ApiVersions)")]
    UnsupportedVersion { api: ApiKey, version: i16 },
    #[error("cannot decode {api:?} v{version}: {reason}")]
    Body {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub header: RequestHeader,
    pub body: Body,
}

#[derive(Debug)]
pub enum Body {
    ApiVersions(ApiVersionsRequest),
    /// ApiVersions at a version above ours: answered with UNSUPPORTED_VERSION in the v0
    /// format, as Kafka does, so the client retries with a version from our list.
    ApiVersionsTooNew,
    Metadata(MetadataRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    InitProducerId(InitProducerIdRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    ListGroups(ListGroupsRequest),
    DescribeGroups(DescribeGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
}

/// Reads one frame's bytes. Ok(None): the peer closed cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    max: u32,
) -> Result<Option<Bytes>, CodecError> {
    let mut len = [0u8; 4];
    match rd.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(len);
    if size < 8 {
        return Err(CodecError::BadLength(size));
    }
    if size as u32 > max {
        return Err(CodecError::TooLarge { size, max });
    }
    let mut body = vec![0u8; size as usize];
    match rd.read_exact(&mut body).await {
        Ok(_) => Ok(Some(Bytes::from(body))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(CodecError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// Decodes a frame (without its size prefix).
pub fn decode_request(mut frame: Bytes) -> Result<Request, CodecError> {
    if frame.len() < 4 {
        return Err(CodecError::BadLength(frame.len() as i32));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).map_err(|()| CodecError::UnknownApiKey(key))?;
    let body_err = |e: anyhow::Error| CodecError::Body {
        api,
        version,
        reason: format!("{e:#}"),
    };
    let (_, max) = super::versions::range(api).ok_or(CodecError::UnsupportedApi(api))?;
    if api == ApiKey::ApiVersions && version > max {
        let header = RequestHeader::decode(&mut frame, 2).map_err(body_err)?;
        let body = Body::ApiVersionsTooNew;
        return Ok(Request { header, body });
    }
    if !super::versions::supported(api, version) {
        return Err(CodecError::UnsupportedVersion { api, version });
    }
    let header =
        RequestHeader::decode(&mut frame, api.request_header_version(version)).map_err(body_err)?;
    super::guard::check_body(api, version, &frame).map_err(|e| CodecError::Body {
        api,
        version,
        reason: e.to_string(),
    })?;
    let buf = &mut frame;
    let body = match api {
        ApiKey::ApiVersions => {
            Body::ApiVersions(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::Metadata => Body::Metadata(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::Produce => Body::Produce(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::Fetch => Body::Fetch(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::ListOffsets => {
            Body::ListOffsets(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::CreateTopics => {
            Body::CreateTopics(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::DeleteTopics => {
            Body::DeleteTopics(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::DescribeConfigs => {
            Body::DescribeConfigs(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::InitProducerId => {
            Body::InitProducerId(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::FindCoordinator => {
            Body::FindCoordinator(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::JoinGroup => Body::JoinGroup(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::SyncGroup => Body::SyncGroup(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::Heartbeat => Body::Heartbeat(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::LeaveGroup => Body::LeaveGroup(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::OffsetCommit => {
            Body::OffsetCommit(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::OffsetFetch => {
            Body::OffsetFetch(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::ListGroups => Body::ListGroups(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::DescribeGroups => {
            Body::DescribeGroups(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::DeleteGroups => {
            Body::DeleteGroups(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::OffsetDelete => {
            Body::OffsetDelete(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::AddPartitionsToTxn => {
            Body::AddPartitionsToTxn(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::AddOffsetsToTxn => {
            Body::AddOffsetsToTxn(Decodable::decode(buf, version).map_err(body_err)?)
        }
        ApiKey::EndTxn => Body::EndTxn(Decodable::decode(buf, version).map_err(body_err)?),
        ApiKey::TxnOffsetCommit => {
            Body::TxnOffsetCommit(Decodable::decode(buf, version).map_err(body_err)?)
        }
        _ => return Err(CodecError::UnsupportedApi(api)),
    };
    if buf.has_remaining() {
        let reason = format!("{} bytes after the body", buf.remaining());
        return Err(CodecError::Body {
            api,
            version,
            reason,
        });
    }
    Ok(Request { header, body })
}

/// A response frame, size prefix included: header (in `api`'s response header version
/// for `version`) and body.
pub fn encode_response<M: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &M,
) -> anyhow::Result<Bytes> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut buf = BytesMut::new();
    buf.put_i32(0); // size, filled in below
    header.encode(&mut buf, api.response_header_version(version))?;
    body.encode(&mut buf, version)?;
    let size = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
