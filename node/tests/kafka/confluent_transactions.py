"""confluent-kafka (librdkafka) transactions against a Skein cluster's Kafka listeners.

A transactional producer (transactional.id, acks=all) runs three transactions on TOPIC
(two partitions): the first commits c0..c9, the second writes a0..a9 and aborts, the third
commits c10..c13 together with the offset 3 of TOPIC partition 0 for group GROUP
(send_offsets_to_transaction, KIP-447). Then a read_committed consumer and a
read_uncommitted one read both partitions from the beginning. Prints one JSON line: what
each read, the group's committed offsets, and any error (with its Kafka name).

With PAUSE, the third transaction stops after its records are delivered (not yet
committed), prints "HALF" and waits for a line on stdin: the test kills the transaction
coordinator meanwhile, and the commit must find the new one.

usage: confluent_transactions.py BOOTSTRAP TOPIC GROUP [PAUSE]
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
pause = len(sys.argv) > 4
out = {"errors": []}


def produce_all(p, values):
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % 2)
    p.flush(60)


def latest(isolation):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm-" + isolation,
                  "isolation.level": isolation})
    _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.close()
    return high


def run_producer():
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": "skein-tx-1",
        "acks": "all",
        "linger.ms": 5,
    })
    p.init_transactions(60)
    out["init"] = True
    p.begin_transaction()
    produce_all(p, ["c%d" % i for i in range(10)])
    p.commit_transaction(60)
    out["first_committed"] = True
    p.begin_transaction()
    produce_all(p, ["a%d" % i for i in range(10)])
    p.abort_transaction(60)
    out["aborted"] = True
    p.begin_transaction()
    produce_all(p, ["c%d" % i for i in range(10, 14)])
    # While it is open (records delivered): ListOffsets' latest of partition 0 for each
    # isolation level, the last stable offset below the high watermark.
    out["open_latest"] = [latest(level) for level in ("read_committed", "read_uncommitted")]
    if pause:
        print("HALF", flush=True)
        sys.stdin.readline()
    # A group's offsets in the transaction; the consumer only lends its group metadata.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 3)],
                                  c.consumer_group_metadata(), 60)
    p.commit_transaction(60)
    c.close()
    out["second_committed"] = True


def read(isolation, expect):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "reader-" + isolation,
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    seen = []
    deadline = time.time() + 30
    quiet_until = None
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            # Past what is expected: a little longer, so extra records would show.
            if len(seen) >= expect:
                quiet_until = quiet_until or time.time() + 2
                if time.time() > quiet_until:
                    break
            continue
        if m.error():
            if not m.error().name().endswith("PARTITION_EOF"):
                out["errors"].append("%s: %s" % (isolation, m.error().name()))
            continue
        seen.append(m.value().decode())
    positions = [tp.offset for tp in c.position(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
    c.close()
    return sorted(seen), positions


try:
    run_producer()
except KafkaException as e:
    err = e.args[0]
    out["errors"].append("producer: %s: %s" % (err.name(), err.str()))

committed, out["committed_positions"] = read("read_committed", 14)
out["read_committed"] = committed
out["read_uncommitted"], _ = read("read_uncommitted", 24)
try:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    got = c.committed([TopicPartition(topic, 0)], timeout=30)
    out["group_offsets"] = [[tp.partition, tp.offset] for tp in got]
    c.close()
except KafkaException as e:
    out["errors"].append("committed: %s" % e.args[0].name())
print(json.dumps(out), flush=True)
