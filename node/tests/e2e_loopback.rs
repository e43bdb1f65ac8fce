#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! End to end on loopback: controller + 3 brokers in process, RF 3, acks=all.

mod common;

use common::{create_durable_topic, produce_values, read_through, TestCluster};
use skein_core::controller::TopicConfig;
use skein_core::message::{Acks, OffsetSpec};
use skein_core::types::TopicPartition;
use skein_node::config::FsyncPolicy;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_1000_records_rf3_acks_all() {
    produce_and_consume(FsyncPolicy::Always).await;
}

/// With a flush interval acks=all still completes: the leader's delayed fsync and the
/// followers' fsync-before-fetch move the high watermark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_with_fsync_interval() {
    produce_and_consume(FsyncPolicy::Interval).await;
}

async fn produce_and_consume(fsync: FsyncPolicy) {
    tokio::time::timeout(Duration::from_secs(120), async {
        let tc = TestCluster::start_with(3, fsync).await;
        let mut client = tc.client();
        create_durable_topic(&mut client, "events", 1).await;
        // Idempotent, so a retry after a lost answer cannot add a second copy.
        client.enable_idempotence().await.unwrap();
        // The topic reaches the brokers with their next heartbeat; produce retries until then.
        let tp = TopicPartition::new("events", 0);
        let mut acked = Vec::new(); // (offset, value)
        for batch in 0..10 {
            let values: Vec<Vec<u8>> = (0..100)
                .map(|i| format!("record-{}", batch * 100 + i).into_bytes())
                .collect();
            acked.extend(produce_values(&mut client, &tp, values, Acks::All).await);
        }
        assert_eq!(acked.len(), 1000);
        // Offsets increase; they are contiguous within a batch, and across batches unless a
        // leader change (e.g. a broker fenced on a loaded machine) put an epoch marker
        // between them.
        for w in acked.windows(2) {
            assert!(
                w[1].0 > w[0].0,
                "offsets go backwards: {} then {}",
                w[0].0,
                w[1].0
            );
        }
        for chunk in acked.chunks(100) {
            assert_eq!(
                chunk[99].0 - chunk[0].0,
                99,
                "a batch's offsets are contiguous"
            );
        }
        // Every replica is in the ISR and the partition has a leader.
        let parts = client.topic_metadata("events").await.unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].replicas.len(), 3);
        assert!(parts[0].leader.is_some());

        // Consume everything from the earliest offset.
        let hw = client.list_offset(&tp, OffsetSpec::Latest).await.unwrap();
        assert!(
            hw > acked.last().unwrap().0,
            "high watermark {hw} covers every acked record"
        );
        let last = acked.last().unwrap().0;
        let consumed: Vec<(u64, Vec<u8>)> = read_through(&mut client, &tp, last)
            .await
            .into_iter()
            .collect();
        assert_eq!(
            consumed, acked,
            "consumed exactly the acknowledged records, in order"
        );
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}

/// A retried idempotent batch (same producer id, epoch, sequence) reaching the leader
/// twice is answered as a duplicate with the original offset, not written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retry_is_a_duplicate_not_a_second_write() {
    use skein_core::controller::{ControllerRequest, ControllerResponse};
    use skein_core::log::{EncodedBatch, ProducerInfo, RecordBatch};
    use skein_core::message::{Message, ProduceRequest};
    use skein_node::client::Conn;

    tokio::time::timeout(Duration::from_secs(60), async {
        let tc = TestCluster::start(3).await;
        let mut client = tc.client();
        create_durable_topic(&mut client, "idem", 1).await;
        let tp = TopicPartition::new("idem", 0);
        // Wait for a leader (a plain write also proves the topic is up).
        let first = client
            .produce(&tp, vec![b"plain".to_vec()], Acks::All)
            .await
            .unwrap();
        let ControllerResponse::InitProducerId(Ok(pid)) = client
            .controller_request(ControllerRequest::InitProducerId)
            .await
            .unwrap()
        else {
            panic!("InitProducerId failed");
        };
        let leader = client.topic_metadata("idem").await.unwrap()[0]
            .leader
            .unwrap();
        let mut conn = Conn::connect(
            tc.cluster.broker(leader).unwrap(),
            skein_node::frame::DEFAULT_MAX_FRAME,
        )
        .await
        .unwrap();
        let batch = RecordBatch::from_values(0, (0..3u8).map(|i| vec![i])).with_producer(Some(
            ProducerInfo {
                producer_id: pid.producer_id,
                producer_epoch: pid.producer_epoch,
                base_sequence: 0,
            },
        ));
        let mut acks = Vec::new();
        for correlation in [1, 2] {
            conn.send(Message::from(ProduceRequest {
                correlation,
                tp: tp.clone(),
                acks: Acks::All,
                timeout: 5_000_000_000,
                batch: EncodedBatch::encode(&batch).unwrap(),
                transactional_id: None,
            }))
            .await
            .unwrap();
            match conn.recv(Duration::from_secs(10)).await.unwrap() {
                Message::ProduceResponse(r) => acks.push(r.result.unwrap()),
                other => panic!("expected ProduceResponse, got {other:?}"),
            }
        }
        assert!(!acks[0].duplicate);
        assert!(acks[1].duplicate, "the second copy is recognised");
        assert_eq!(acks[0].base_offset, acks[1].base_offset);
        assert!(acks[0].base_offset > first.base_offset.unwrap());
        // The log holds the batch once: the high watermark is just past it.
        let hw = client.list_offset(&tp, OffsetSpec::Latest).await.unwrap();
        assert_eq!(hw, acks[0].base_offset + 3);
        tc.stop().await;
    })
    .await
    .expect("test finished within 60 s");
}

/// acks=1 returns offsets; acks=0 returns none, and its records still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_leader_and_none() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let tc = TestCluster::start(3).await;
        let mut client = tc.client();
        let config = TopicConfig {
            replication_factor: 3,
            ..TopicConfig::default()
        };
        client.create_topic("a", config).await.unwrap();
        let tp = TopicPartition::new("a", 0);
        let one = client
            .produce(&tp, vec![b"one".to_vec()], Acks::Leader)
            .await
            .unwrap();
        assert!(one.base_offset.is_some());
        let zero = client
            .produce(&tp, vec![b"zero".to_vec()], Acks::None)
            .await
            .unwrap();
        assert_eq!(zero.base_offset, None);
        let mut values = Vec::new();
        let mut at = one.base_offset.unwrap();
        while values.len() < 2 {
            let (records, _) = client.fetch(&tp, at, 1 << 20).await.unwrap();
            for (o, v) in records {
                at = o + 1;
                values.push(v.unwrap());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(values, vec![b"one".to_vec(), b"zero".to_vec()]);
        tc.stop().await;
    })
    .await
    .expect("test finished within 60 s");
}
