"""A confluent-kafka (librdkafka) consumer group of two against a Skein cluster's Kafka
listeners. Writes N records (value = its number) round robin over TOPIC's partitions, then:
consumer A subscribes alone and reads a third; B subscribes, both poll (one thread,
alternately) until both hold partitions and B has read something; A closes (LeaveGroup),
and B, after the rebalance, reads the rest. Each consumer commits every record it reads,
synchronously, before reading on. A record counts as read by a consumer when the commit
after it succeeded; a record whose commit failed is read again (seek back), by the same
consumer or by the next owner.

Prints one JSON line: per consumer the records it read (and committed) and the partitions
it held; the test checks that every record was committed by exactly one of them.

STRATEGY is librdkafka's partition.assignment.strategy (default "range,roundrobin";
"cooperative-sticky" rebalances incrementally, from the owned partitions each member's
subscription carries).

usage: confluent_group.py BOOTSTRAP TOPIC PARTITIONS N GROUP [STRATEGY]
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic, parts, n, group = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
strategy = sys.argv[6] if len(sys.argv) > 6 else "range,roundrobin"

p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
for i in range(n):
    p.produce(topic, value=str(i), partition=i % parts)
assert p.flush(60) == 0, "records left unacknowledged"


def consumer(name):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": strategy,
    })
    c.subscribe([topic])
    return c


read = {"A": [], "B": []}
held = {"A": set(), "B": set()}
failed_commits = []


def poll_one(name, c):
    for tp in c.assignment():
        held[name].add(tp.partition)
    msg = c.poll(0.2)
    if msg is None:
        return
    if msg.error():
        raise KafkaException(msg.error())
    try:
        c.commit(message=msg, asynchronous=False)
    except KafkaException as e:
        failed_commits.append([name, msg.partition(), msg.offset(), str(e)])
        # Read it again (if the partition stays ours): the position moved past it, and a
        # cooperative rebalance keeps the partition without resetting the position.
        try:
            c.seek(TopicPartition(msg.topic(), msg.partition(), msg.offset()))
        except KafkaException:
            pass
        return
    read[name].append(int(msg.value()))


def total():
    return len(read["A"]) + len(read["B"])


deadline = time.time() + 150
a = consumer("A")
while len(read["A"]) < n // 3 and time.time() < deadline:
    poll_one("A", a)
b = consumer("B")
both = False
while time.time() < deadline and not (both and read["B"] and total() >= 2 * n // 3):
    poll_one("A", a)
    poll_one("B", b)
    both = both or (len(a.assignment()) > 0 and len(b.assignment()) > 0)
shared = both
a.close()
while total() < n and time.time() < deadline:
    poll_one("B", b)
# Anything read twice would show as a total above n: poll a little more.
end = time.time() + 2
while time.time() < end:
    poll_one("B", b)
b.close()
print(json.dumps({
    "read": read,
    "held": {k: sorted(v) for k, v in held.items()},
    "shared": shared,
    "failed_commits": failed_commits,
}), flush=True)
