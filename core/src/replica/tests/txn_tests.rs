//! The partition side of transactions on three replicas: transactional writes hold the last
//! stable offset until their marker commits, read_committed reads stop there and list the
//! aborted transactions, markers are fenced by coordinator and producer epoch, and all of
//! it is rebuilt from the log on a new leader and after a restart.

use super::*;
use crate::client::FetchCursor;
use crate::txn::{AbortedTxn, IsolationLevel, MarkerError, TxnResult, WriteTxnMarkerRequest};

type L = PartitionLog<MemStorage>;

fn three() -> Net<L> {
    let mut net = Net::<L>::new(&[1, 2, 3], config());
    net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
    net.run(5 * MS);
    net
}

/// A transactional batch of `values` from producer `pid` at `epoch`, first sequence `seq`.
fn txn_batch(pid: u64, epoch: u16, seq: u32, values: &[&str]) -> RecordBatch {
    batch(values)
        .transactional()
        .with_producer(Some(ProducerInfo {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
        }))
}

/// A transactional produce (acks=all) with a transactional id, to node `node`.
fn produce_txn(net: &mut Net<L>, node: NodeId, b: RecordBatch, id: Option<&str>) -> u64 {
    net.correlation += 1;
    let c = net.correlation;
    let now = net.now;
    let req = ProduceRequest {
        correlation: c,
        tp: tp(),
        acks: Acks::All,
        timeout: 1000 * MS,
        batch: EncodedBatch::encode(&b).expect("encodable"),
        transactional_id: id.map(str::to_string),
    };
    net.r(node).handle_produce(now, Address::Client(0), req);
    net.collect();
    net.deliver_all();
    c
}

fn marker_req(
    pid: u64,
    epoch: u16,
    coordinator_epoch: u32,
    result: TxnResult,
) -> WriteTxnMarkerRequest {
    WriteTxnMarkerRequest {
        correlation: 0,
        tp: tp(),
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch,
        result,
        bumped: false,
    }
}

/// A marker appended at node `node` under local correlation `c`.
fn write_marker(
    net: &mut Net<L>,
    node: NodeId,
    c: u64,
    req: WriteTxnMarkerRequest,
) -> Result<(), MarkerError> {
    let now = net.now;
    let r = net.r(node).append_txn_marker(now, c, &req, 1000 * MS);
    net.collect();
    net.deliver_all();
    r
}

fn fetch_req(offset: Offset, max_bytes: usize, isolation: IsolationLevel) -> ConsumerFetchRequest {
    ConsumerFetchRequest {
        correlation: 9,
        tp: tp(),
        offset,
        max_bytes,
        current_leader_epoch: None,
        last_fetched_epoch: None,
        isolation,
    }
}

fn read(
    net: &mut Net<L>,
    node: NodeId,
    offset: Offset,
    isolation: IsolationLevel,
) -> ConsumerRecords {
    let req = fetch_req(offset, 1 << 20, isolation);
    net.consumer_fetch(node, &req).result.expect("read")
}

fn latest(net: &mut Net<L>, node: NodeId, isolation: IsolationLevel) -> Offset {
    let req = ListOffsetsRequest {
        correlation: 1,
        tp: tp(),
        spec: OffsetSpec::Latest,
        isolation,
    };
    let listed = net.list_offsets(node, &req).result.expect("listed");
    listed.expect("an offset").offset
}

/// Every record value a read_committed cursor takes from node `node`, reading from 0 with
/// `max_bytes` per fetch until it stands at the LSO (at most 50 fetches: a stall fails).
fn read_committed_values(net: &mut Net<L>, node: NodeId, max_bytes: usize) -> Vec<String> {
    let mut cursor = FetchCursor::new(0).with_isolation(IsolationLevel::ReadCommitted);
    let mut out = Vec::new();
    for _ in 0..50 {
        let recs = net.consumer_fetch(node, &cursor.request(1, tp(), max_bytes));
        let recs = recs.result.expect("read");
        for (_, _, r) in cursor.take(&recs).records {
            out.push(String::from_utf8(r.value.clone().unwrap()).unwrap());
        }
        if cursor.position() >= recs.last_stable_offset {
            return out;
        }
    }
    panic!("the reader stalled at {}", cursor.position());
}

const RC: IsolationLevel = IsolationLevel::ReadCommitted;
const RU: IsolationLevel = IsolationLevel::ReadUncommitted;

#[test]
fn an_open_transaction_holds_the_lso_and_its_commit_releases_it() {
    let mut net = three();
    net.produce(1, Acks::All, &["a"]);
    let c = produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["t1", "t2"]), Some("tx"));
    net.run(100 * MS);
    assert!(
        matches!(net.response(c), Some(Ok(_))),
        "{:?}",
        net.response(c)
    );
    // Offsets: 0 epoch marker, 1 "a", 2-3 the transaction.
    assert_eq!(net.r(1).high_watermark(), 4);
    assert_eq!(net.r(1).last_stable_offset(), 2);
    let recs = read(&mut net, 1, 0, RC);
    assert_eq!(recs.next_offset, 2, "never past the LSO");
    assert_eq!(recs.last_stable_offset, 2);
    assert_eq!(
        recs.batches.len(),
        1,
        "only the record before the transaction"
    );
    assert!(recs.aborted.is_empty());
    let from_lso = read(&mut net, 1, 2, RC);
    assert!(from_lso.batches.is_empty() && from_lso.next_offset == 2);
    // read_uncommitted is today's read: up to the HW, the LSO reported alongside.
    let ru = read(&mut net, 1, 0, RU);
    assert_eq!(
        (ru.batches.len(), ru.next_offset, ru.last_stable_offset),
        (2, 4, 2)
    );
    assert_eq!(latest(&mut net, 1, RC), 2);
    assert_eq!(latest(&mut net, 1, RU), 4);

    // The commit marker: in the log at 4, but the LSO waits for the HW to pass it.
    net.cut(&[(2, 1), (3, 1)]);
    assert_eq!(
        write_marker(&mut net, 1, 50, marker_req(7, 0, 0, TxnResult::Commit)),
        Ok(())
    );
    assert_eq!(net.r(1).log().log_end_offset(), 5);
    assert_eq!(
        net.r(1).last_stable_offset(),
        2,
        "the marker is not committed yet"
    );
    assert!(net.marker_answers.is_empty(), "answered once committed");
    net.cut(&[]);
    net.run(100 * MS);
    assert_eq!(net.r(1).high_watermark(), 5);
    assert_eq!(net.r(1).last_stable_offset(), 5);
    let answer = net.marker_answers.pop().expect("the marker is answered");
    assert_eq!(answer.correlation, 50);
    assert!(answer.result.is_ok(), "{answer:?}");
    let recs = read(&mut net, 1, 0, RC);
    assert_eq!(recs.batches.len(), 2);
    assert_eq!(recs.next_offset, 5, "past the marker");
    assert!(recs.aborted.is_empty());
    assert_eq!(
        read_committed_values(&mut net, 1, 1 << 20),
        ["a", "t1", "t2"]
    );
}

#[test]
fn an_aborted_transaction_is_listed_and_its_records_dropped_by_the_reader() {
    let mut net = three();
    net.produce(1, Acks::All, &["a"]);
    produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["x1", "x2"]), Some("tx"));
    // Another producer's committed transaction interleaves with the aborted one.
    produce_txn(&mut net, 1, txn_batch(8, 0, 0, &["k1"]), Some("ty"));
    produce_txn(&mut net, 1, txn_batch(7, 0, 2, &["x3"]), Some("tx"));
    net.run(100 * MS);
    assert_eq!(net.r(1).last_stable_offset(), 2);
    write_marker(&mut net, 1, 1, marker_req(7, 0, 0, TxnResult::Abort)).unwrap();
    net.run(100 * MS);
    assert_eq!(
        net.r(1).last_stable_offset(),
        4,
        "producer 8's transaction is open at 4"
    );
    write_marker(&mut net, 1, 2, marker_req(8, 0, 0, TxnResult::Commit)).unwrap();
    net.produce(1, Acks::All, &["b"]);
    net.run(100 * MS);
    // 0 marker, 1 a, 2-3 x1 x2, 4 k1, 5 x3, 6 abort, 7 commit, 8 b.
    assert_eq!(net.r(1).last_stable_offset(), 9);
    let abort = AbortedTxn {
        producer_id: 7,
        first_offset: 2,
        last_offset: 6,
    };
    let recs = read(&mut net, 1, 0, RC);
    assert_eq!(recs.aborted, [abort]);
    assert!(
        read(&mut net, 1, 0, RU).aborted.is_empty(),
        "read_uncommitted: no list"
    );
    assert!(
        read(&mut net, 1, 7, RC).aborted.is_empty(),
        "past the abort marker"
    );
    assert_eq!(
        read(&mut net, 1, 5, RC).aborted,
        [abort],
        "inside the range"
    );
    assert_eq!(
        read_committed_values(&mut net, 1, 1 << 20),
        ["a", "k1", "b"]
    );
    // One batch per fetch: a reader never stalls on a marker (the abort marker and the
    // commit marker sit together at 6-7).
    assert_eq!(read_committed_values(&mut net, 1, 1), ["a", "k1", "b"]);
    let mut c = FetchCursor::new(0);
    let recs = net
        .consumer_fetch(1, &c.request(1, tp(), 1 << 20))
        .result
        .unwrap();
    assert_eq!(
        c.take(&recs).records.len(),
        6,
        "read_uncommitted takes aborted records too"
    );
}

#[test]
fn a_marker_at_the_end_of_the_range_does_not_stall_a_reader() {
    let mut net = three();
    produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["t"]), Some("tx"));
    net.run(100 * MS);
    write_marker(&mut net, 1, 1, marker_req(7, 0, 0, TxnResult::Commit)).unwrap();
    net.run(100 * MS);
    // 0 epoch marker, 1 t, 2 commit marker = the end of the log.
    assert_eq!(net.r(1).last_stable_offset(), 3);
    let recs = read(&mut net, 1, 2, RC);
    assert!(recs.batches.is_empty());
    assert_eq!(recs.next_offset, 3, "moved past the marker");
    let mut req = fetch_req(1, 1, RC);
    let recs = net.consumer_fetch(1, &req).result.unwrap();
    assert_eq!((recs.batches.len(), recs.next_offset), (1, 2));
    req.offset = 2;
    assert_eq!(net.consumer_fetch(1, &req).result.unwrap().next_offset, 3);
    assert_eq!(read_committed_values(&mut net, 1, 1), ["t"]);
}

#[test]
fn the_zoo_no_lso_reads_open_transactions_up_to_the_hw() {
    let mut config = config();
    config.bugs.txn.no_lso = true;
    let mut net = Net::<L>::new(&[1, 2, 3], config);
    net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
    net.run(5 * MS);
    produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["t"]), Some("tx"));
    net.run(100 * MS);
    assert_eq!(net.r(1).last_stable_offset(), 1, "the LSO itself is right");
    let recs = read(&mut net, 1, 0, RC);
    assert_eq!(
        (recs.batches.len(), recs.next_offset),
        (1, 2),
        "bug: bounded by the HW"
    );
    assert_eq!(latest(&mut net, 1, RC), 2);
}

#[test]
fn transaction_state_survives_a_leader_change_and_a_restart() {
    let mut net = three();
    produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["x"]), Some("tx"));
    net.run(100 * MS);
    write_marker(&mut net, 1, 1, marker_req(7, 0, 3, TxnResult::Abort)).unwrap();
    produce_txn(&mut net, 1, txn_batch(8, 0, 0, &["open"]), Some("ty"));
    net.run(100 * MS);
    // 0 epoch marker, 1 x, 2 abort, 3 open.
    assert_eq!(net.r(1).last_stable_offset(), 3);
    let abort = AbortedTxn {
        producer_id: 7,
        first_offset: 1,
        last_offset: 2,
    };
    // Node 2 takes over: its table is rebuilt from its log (epoch marker at 4).
    net.elect(&[1, 2, 3], Some(2), 2, 2, &[1, 2, 3]);
    net.run(100 * MS);
    assert_eq!(net.r(2).high_watermark(), 5);
    assert_eq!(
        net.r(2).last_stable_offset(),
        3,
        "the open transaction still holds it"
    );
    assert_eq!(read(&mut net, 2, 0, RC).aborted, [abort]);
    // Its coordinator epoch and the open transaction came along: an older coordinator is
    // fenced, and producer 8's next write needs no verification.
    assert_eq!(
        write_marker(&mut net, 2, 2, marker_req(7, 0, 2, TxnResult::Abort)),
        Err(MarkerError::CoordinatorFenced {
            request: 2,
            current: 3
        })
    );
    let header = EncodedBatch::encode(&txn_batch(8, 0, 1, &["more"]))
        .unwrap()
        .header()
        .unwrap();
    assert!(!net.r(2).needs_txn_verification(&header));
    // Every node restarts from its disk; node 3 leads epoch 3 from a recovered log.
    for id in [1, 2, 3] {
        net.crash(id);
        net.restart(id);
    }
    net.elect(&[1, 2, 3], Some(3), 3, 3, &[1, 2, 3]);
    net.run(200 * MS);
    assert_eq!(net.r(3).high_watermark(), 6);
    assert_eq!(net.r(3).last_stable_offset(), 3);
    write_marker(&mut net, 3, 3, marker_req(8, 0, 3, TxnResult::Commit)).unwrap();
    net.run(100 * MS);
    assert_eq!(net.r(3).last_stable_offset(), 7);
    assert_eq!(read(&mut net, 3, 0, RC).aborted, [abort]);
    assert_eq!(read_committed_values(&mut net, 3, 1 << 20), ["open"]);
}

#[test]
fn a_late_marker_or_write_at_an_older_producer_epoch_is_fenced() {
    let mut net = three();
    produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["t"]), Some("tx"));
    net.run(100 * MS);
    // KIP-890 part 2: the coordinator ends the transaction with the bumped epoch 1.
    write_marker(&mut net, 1, 1, marker_req(7, 1, 0, TxnResult::Commit)).unwrap();
    net.run(100 * MS);
    assert_eq!(
        write_marker(&mut net, 1, 2, marker_req(7, 0, 0, TxnResult::Abort)),
        Err(MarkerError::InvalidProducerEpoch {
            request: 0,
            current: 1
        })
    );
    // A late write of the finished transaction is refused; the next one, at epoch 1,
    // starts its sequence again at 0.
    let late = produce_txn(&mut net, 1, txn_batch(7, 0, 1, &["late"]), Some("tx"));
    assert!(
        matches!(
            net.response(late),
            Some(Err(ProduceError::InvalidProducerEpoch(_)))
        ),
        "{:?}",
        net.response(late)
    );
    let next = produce_txn(&mut net, 1, txn_batch(7, 1, 0, &["next"]), Some("tx"));
    net.run(100 * MS);
    assert!(matches!(net.response(next), Some(Ok(_))));
    assert_eq!(net.values(1).len(), 2, "t and next, not late");
}

#[test]
fn markers_and_transactional_batches_are_checked_before_they_reach_the_log() {
    let mut net = three();
    // A follower is no leader for markers.
    assert_eq!(
        write_marker(&mut net, 2, 1, marker_req(7, 0, 0, TxnResult::Commit)),
        Err(MarkerError::NotLeader)
    );
    // A transactional batch needs a transactional id (from a client) and a producer id.
    let no_id = produce_txn(&mut net, 1, txn_batch(7, 0, 0, &["t"]), None);
    assert!(matches!(
        net.response(no_id),
        Some(Err(ProduceError::InvalidRecord(_)))
    ));
    let no_pid = produce_txn(&mut net, 1, batch(&["t"]).transactional(), Some("tx"));
    assert!(matches!(
        net.response(no_pid),
        Some(Err(ProduceError::InvalidRecord(_)))
    ));
    // A client may not write a marker itself.
    let m = crate::log::TxnMarker {
        producer_id: 7,
        producer_epoch: 0,
        result: TxnResult::Commit,
        coordinator_epoch: 0,
    };
    let forged = produce_txn(&mut net, 1, RecordBatch::txn_marker(m, 0), Some("tx"));
    assert!(matches!(
        net.response(forged),
        Some(Err(ProduceError::InvalidRecord(_)))
    ));
    assert_eq!(net.r(1).log().log_end_offset(), 1, "only the epoch marker");
    // Below min.insync.replicas no marker is written.
    let mut cfg = config();
    cfg.min_insync_replicas = 2;
    let log = <L as TestLog>::fresh();
    let mut lone = Replica::new(tp(), 1, log, cfg);
    lone.apply_partition_state(0, Some(1), 1, 1, &[1], &[1]);
    assert_eq!(
        lone.append_txn_marker(0, 1, &marker_req(7, 0, 0, TxnResult::Commit), MS),
        Err(MarkerError::NotEnoughReplicas {
            isr: 1,
            min_insync: 2
        })
    );
}

#[test]
fn only_a_write_outside_an_open_transaction_needs_verification() {
    let mut net = three();
    let header = |b: &RecordBatch| EncodedBatch::encode(b).unwrap().header().unwrap();
    let first = txn_batch(7, 0, 0, &["t"]);
    assert!(net.r(1).needs_txn_verification(&header(&first)));
    assert!(
        !net.r(2).needs_txn_verification(&header(&first)),
        "followers do not ask"
    );
    let plain = batch(&["p"]).with_producer(Some(ProducerInfo {
        producer_id: 9,
        producer_epoch: 0,
        base_sequence: 0,
    }));
    assert!(
        !net.r(1).needs_txn_verification(&header(&plain)),
        "not transactional"
    );
    produce_txn(&mut net, 1, first.clone(), Some("tx"));
    net.run(100 * MS);
    assert!(!net
        .r(1)
        .needs_txn_verification(&header(&txn_batch(7, 0, 1, &["u"]))));
    assert!(
        !net.r(1).needs_txn_verification(&header(&first)),
        "a duplicate is answered as one"
    );
    write_marker(&mut net, 1, 1, marker_req(7, 1, 0, TxnResult::Commit)).unwrap();
    net.run(100 * MS);
    // The next transaction, at the bumped epoch, is verified again.
    assert!(net
        .r(1)
        .needs_txn_verification(&header(&txn_batch(7, 1, 0, &["v"]))));
}
