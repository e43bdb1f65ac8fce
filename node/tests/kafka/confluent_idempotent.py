"""confluent-kafka (librdkafka) against a Skein cluster's Kafka listeners: an idempotent
producer (enable.idempotence, acks=all) writes N keyed records to TOPIC, then a consumer
with explicit assignment (no consumer group; confluent_group.py has one) reads every
partition from the beginning. Prints one JSON line: what was acknowledged and what was read.

With PAUSE, the producer stops after the first half (all delivered), prints "HALF" and
waits for a line on stdin before the second half: the test kills a leader meanwhile.

With SKEIN_HISTORY=PATH in the environment it also writes what the clients did as a Skein
history (docs/history.md, JSON Lines) for `skein check`: each record is sent by its own
process (librdkafka keeps many in flight, and a history process does one operation at a
time), invoked when handed to the producer and completed by its delivery report (ok with
its offset, or info: a failed delivery may still have been written); the consumer is one
more process that assigns every partition and polls.

usage: confluent_idempotent.py BOOTSTRAP TOPIC N [PAUSE]
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pause = len(sys.argv) > 4

acked, errors = [], []
history = []  # (process, type, f, value) in the order they happened


def record(process, typ, f, value):
    history.append({"time": time.monotonic_ns(), "process": process, "type": typ, "f": f,
                    "value": value})


def delivered(err, msg):
    i = int(msg.value().decode()[1:])
    sent = {"topic": topic, "partition": msg.partition(), "value": msg.value().decode(),
            "acks": "all"}
    if err is not None:
        errors.append(str(err))
        record(i, "info", "send", sent if msg.partition() >= 0 else None)
    else:
        acked.append([msg.partition(), msg.offset(), msg.value().decode()])
        record(i, "ok", "send", dict(sent, offset=msg.offset()))


p = Producer({
    "bootstrap.servers": bootstrap,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
})
for i in range(n):
    if pause and i == n // 2:
        p.flush(60)
        print("HALF", flush=True)
        sys.stdin.readline()
    record(i, "invoke", "send", None)  # the partition is known only once delivered
    p.produce(topic, key=f"k{i % 10}", value=f"v{i}", on_delivery=delivered)
    p.poll(0)
left = p.flush(120)
if left or errors:
    print(json.dumps({"error": f"{left} undelivered, errors {errors[:5]}"}))
    sys.exit(1)

md = p.list_topics(topic, timeout=10)
parts = sorted(md.topics[topic].partitions)
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "unused",  # required by the client; no group API is called with assign()
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, pt, 0) for pt in parts])
reader = n  # the consumer's history process, after the senders 0..n
record(reader, "invoke", "assign", None)
record(reader, "ok", "assign", {"partitions": [[topic, pt] for pt in parts]})
read, eof = [], set()
while len(eof) < len(parts):
    m = c.poll(10)
    if m is None:
        print(json.dumps({"error": f"timed out after {len(read)} records"}))
        sys.exit(1)
    if m.error():
        if m.error().code() == -191:  # _PARTITION_EOF
            eof.add(m.partition())
            continue
        raise KafkaException(m.error())
    read.append([m.partition(), m.offset(), m.value().decode()])
    record(reader, "invoke", "poll", None)
    record(reader, "ok", "poll", {"records": [{"topic": topic, "partition": m.partition(),
                                              "offset": m.offset(),
                                              "value": m.value().decode()}]})
c.close()
path = os.environ.get("SKEIN_HISTORY")
if path:
    with open(path, "w") as f:
        for index, e in enumerate(history):
            f.write(json.dumps(dict(e, index=index)) + "\n")
print(json.dumps({"acked": acked, "read": read, "partitions": len(parts)}))
