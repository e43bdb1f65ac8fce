//! A hand-made Kafka client for the listener's tests: one request per connection, with
//! the `kafka-protocol` crate's encoders, so each answer is checked as sent.

#![allow(dead_code)]

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The brokers' Kafka listeners by broker id, from a `skein cluster up` cluster file.
pub fn listeners(cf: &str) -> BTreeMap<i32, String> {
    let toml = std::fs::read_to_string(cf).unwrap();
    let mut out = BTreeMap::new();
    let mut id = None;
    for line in toml.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("id = ") {
            id = v.parse().ok();
        }
        if let (Some(v), Some(i)) = (line.strip_prefix("kafka_listener = "), id) {
            out.insert(i, v.trim_matches('"').to_string());
        }
    }
    assert!(!out.is_empty(), "no Kafka listeners in {toml}");
    out
}

/// One request on a fresh connection and its decoded answer; None when the broker is
/// unreachable or closes the connection.
pub fn exchange<Req: Encodable, Resp: Decodable>(
    addr: &str,
    api: ApiKey,
    version: i16,
    body: &Req,
) -> Option<Resp> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("skein-test")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    s.write_all(&buf).ok()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, api.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7);
    let resp = Resp::decode(&mut body, version).unwrap();
    assert!(!body.has_remaining(), "{api:?} v{version}: trailing bytes");
    Some(resp)
}

/// The Kafka address of `group`'s coordinator, asked until one answers (60 s at most).
pub fn coordinator(listeners: &BTreeMap<i32, String>, group: &str) -> String {
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for addr in listeners.values() {
            let r: Option<FindCoordinatorResponse> =
                exchange(addr, ApiKey::FindCoordinator, 2, &req);
            if let Some(r) = r.filter(|r| r.error_code == 0) {
                return format!("{}:{}", r.host, r.port);
            }
        }
        assert!(Instant::now() < deadline, "no coordinator for {group}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
