#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! Bad input on a broker port: each kind closes that connection with a Goodbye naming the
//! problem and a logged, typed reason; the broker stays up and serves the next client.

mod common;

use common::TestCluster;
use skein_core::log::{EncodedBatch, RecordBatch};
use skein_core::message::{Acks, Message, MetadataRequest, ProduceError, ProduceRequest};
use skein_core::types::TopicPartition;
use skein_node::client::Conn;
use skein_node::frame::{
    encode, kind, raw_frame, read_frame, Frame, Hello, Peer, DEFAULT_MAX_FRAME, HEADER_LEN,
};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Everything logged by this test binary.
#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static LogBuf {
    static LOGS: OnceLock<LogBuf> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = LogBuf::default();
        let writer = buf.clone();
        tracing_subscriber::fmt()
            .with_env_filter("skein_node=warn")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        buf
    })
}

fn hello() -> Vec<u8> {
    encode(
        &Frame::Hello(Hello { from: Peer::Client }),
        DEFAULT_MAX_FRAME,
    )
    .unwrap()
}

/// Sends `bytes` (then closes our write side if `close`), and returns the Goodbye reason
/// the broker answers with, after checking it then closes the connection.
async fn send_bad(addr: SocketAddr, bytes: &[u8], close: bool) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    if close {
        s.shutdown().await.unwrap();
    }
    let (mut rd, _wr) = s.into_split();
    let reason = match read_frame(&mut rd, DEFAULT_MAX_FRAME).await {
        Ok(Some(Frame::Goodbye(g))) => g.reason,
        other => panic!("expected a Goodbye, got {other:?}"),
    };
    assert_eq!(
        read_frame(&mut rd, DEFAULT_MAX_FRAME).await,
        Ok(None),
        "connection closed after the Goodbye"
    );
    reason
}

/// A well-behaved client still gets served, and (within a few seconds: on a loaded
/// machine the first heartbeat may still be on its way) the broker knows itself as live.
async fn still_serves(addr: SocketAddr) {
    let mut conn = Conn::connect(addr, DEFAULT_MAX_FRAME).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for correlation in 42.. {
        conn.send(Message::Metadata(MetadataRequest {
            correlation,
            topics: None,
        }))
        .await
        .unwrap();
        match conn.recv(Duration::from_secs(5)).await.unwrap() {
            Message::MetadataResponse(m) => {
                assert_eq!(m.correlation, correlation);
                if m.brokers.len() == 1 {
                    return;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the broker does not know itself as live: {m:?}"
                );
            }
            other => panic!("expected MetadataResponse, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assert_logged(needle: &str) {
    let text = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    assert!(
        text.lines()
            .any(|l| l.contains("closing connection: bad input") && l.contains(needle)),
        "no log line for {needle:?} in:\n{text}"
    );
}

/// Well-formed frames whose batch bytes are not a good batch: each is answered with an
/// error naming the problem (the connection stays open), and nothing is written.
async fn corrupt_batches_are_refused_by_name(addr: SocketAddr, tp: &TopicPartition) {
    let good = EncodedBatch::encode(&RecordBatch::from_values(0, [b"evil".to_vec()]))
        .unwrap()
        .into_bytes();
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let mut magic = good.clone();
    magic[12] = 9;
    let empty = EncodedBatch::encode(&RecordBatch::from_values(0, []))
        .unwrap()
        .into_bytes();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("bad CRC", flipped, "CRC mismatch"),
        ("truncated", good[..good.len() - 1].to_vec(), "truncated"),
        ("wrong magic", magic, "unsupported batch format version 9"),
        ("not a batch", b"evil".to_vec(), "truncated"),
        ("zero records", empty, "empty batch"),
    ];
    let mut conn = Conn::connect(addr, DEFAULT_MAX_FRAME).await.unwrap();
    for (i, (what, bytes, needle)) in cases.into_iter().enumerate() {
        let correlation = 100 + i as u64;
        conn.send(Message::from(ProduceRequest {
            correlation,
            tp: tp.clone(),
            acks: Acks::Leader,
            timeout: 1_000_000_000,
            batch: EncodedBatch::from_bytes(bytes),
            transactional_id: None,
        }))
        .await
        .unwrap();
        match conn.recv(Duration::from_secs(5)).await.unwrap() {
            Message::ProduceResponse(r) => {
                assert_eq!(r.correlation, correlation);
                let e = r.result.expect_err(what);
                assert!(
                    matches!(
                        e,
                        ProduceError::CorruptBatch(_) | ProduceError::InvalidRecord(_)
                    ),
                    "{what}: {e:?}"
                );
                assert!(e.to_string().contains(needle), "{what}: {e}");
            }
            other => panic!("{what}: expected a ProduceResponse, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_close_the_connection_and_the_broker_stays_up() {
    logs();
    tokio::time::timeout(Duration::from_secs(60), async {
        let tc = TestCluster::start(1).await;
        let addr = tc.cluster.broker(1).unwrap();
        still_serves(addr).await;
        // Some data, to show bad input changes nothing in the log.
        let mut client = tc.client();
        client
            .create_topic("keep", skein_core::controller::TopicConfig::default())
            .await
            .unwrap();
        let tp = TopicPartition::new("keep", 0);
        client
            .produce(
                &tp,
                vec![b"a".to_vec(), b"b".to_vec()],
                skein_core::message::Acks::All,
            )
            .await
            .unwrap();
        let end_before = client
            .list_offset(&tp, skein_core::message::OffsetSpec::Latest)
            .await
            .unwrap();

        // Garbage: an HTTP request.
        let r = send_bad(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
        assert!(r.contains("bad magic"), "{r}");
        assert_logged("bad magic");
        still_serves(addr).await;

        // Oversized: a header announcing one byte more than the maximum.
        let mut big = raw_frame(kind::METADATA, b"");
        big[8..12].copy_from_slice(&(DEFAULT_MAX_FRAME + 1).to_be_bytes());
        let r = send_bad(addr, &[hello(), big].concat(), false).await;
        assert!(r.contains("oversized"), "{r}");
        assert_logged("oversized frame");
        still_serves(addr).await;

        // Truncated: a frame cut short, then end of stream.
        let frame = raw_frame(kind::METADATA, &[0u8; 100]);
        let cut = &frame[..HEADER_LEN + 10];
        let r = send_bad(addr, &[hello(), cut.to_vec()].concat(), true).await;
        assert!(r.contains("truncated"), "{r}");
        assert_logged("truncated frame");
        still_serves(addr).await;

        // A valid frame (good CRC) with an unknown message type.
        let r = send_bad(addr, &[hello(), raw_frame(200, b"hello?")].concat(), false).await;
        assert!(r.contains("unknown message type 200"), "{r}");
        assert_logged("unknown message type 200");
        still_serves(addr).await;

        // A corrupted frame: CRC mismatch.
        let mut bad_crc = raw_frame(kind::METADATA, b"\x01\x00");
        bad_crc[HEADER_LEN] ^= 0x40;
        let r = send_bad(addr, &[hello(), bad_crc].concat(), false).await;
        assert!(r.contains("CRC mismatch"), "{r}");
        still_serves(addr).await;

        // A known type whose payload does not decode.
        let r = send_bad(
            addr,
            &[hello(), raw_frame(kind::PRODUCE, b"\xff\xff\xff")].concat(),
            false,
        )
        .await;
        assert!(r.contains("undecodable"), "{r}");
        assert_logged("undecodable payload");
        still_serves(addr).await;

        // A message before the Hello.
        let meta = encode(
            &Frame::Msg(Message::Metadata(MetadataRequest {
                correlation: 1,
                topics: None,
            })),
            DEFAULT_MAX_FRAME,
        )
        .unwrap();
        let r = send_bad(addr, &meta, false).await;
        assert!(r.contains("expected Hello"), "{r}");
        still_serves(addr).await;

        // A forged Produce whose CRC is wrong never reaches the log.
        let mut forged = encode(
            &Frame::Msg(Message::from(ProduceRequest {
                correlation: 7,
                tp: tp.clone(),
                acks: Acks::Leader,
                timeout: 1_000_000_000,
                batch: EncodedBatch::encode(&RecordBatch::from_values(0, [b"evil".to_vec()]))
                    .unwrap(),
                transactional_id: None,
            })),
            DEFAULT_MAX_FRAME,
        )
        .unwrap();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        let r = send_bad(addr, &[hello(), forged].concat(), false).await;
        assert!(r.contains("CRC mismatch"), "{r}");

        // Good frames, bad batches: answered by name, nothing written (checked below).
        corrupt_batches_are_refused_by_name(addr, &tp).await;
        still_serves(addr).await;

        let end_after = client
            .list_offset(&tp, skein_core::message::OffsetSpec::Latest)
            .await
            .unwrap();
        assert_eq!(end_before, end_after, "bad input wrote nothing");
        let (records, _) = client.fetch(&tp, 0, 1 << 20).await.unwrap();
        let values: Vec<Vec<u8>> = records.into_iter().filter_map(|(_, v)| v).collect();
        assert_eq!(values, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(!tc.brokers[0].is_finished(), "the broker is still running");
        tc.stop().await;
    })
    .await
    .expect("test finished within 60 s");
}
