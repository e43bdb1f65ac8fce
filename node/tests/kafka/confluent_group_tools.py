"""confluent-kafka's AdminClient group tooling against a Skein cluster's Kafka listeners:
a consumer group reads a 2-partition topic and commits, then list_consumer_groups,
describe_consumer_groups (idle, and while a member holds the partitions),
list_consumer_group_offsets and delete_consumer_groups (refused while the group has a
member, then taken, then GROUP_ID_NOT_FOUND). Prints one JSON line with what it saw; the
Rust test (node/tests/kafka_group_tools.rs) judges it.

usage: confluent_group_tools.py BOOTSTRAP TOPIC
"""
import json
import sys
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka.admin import AdminClient

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
out = {}

p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for i in range(30):
    p.produce(topic, value=b"v%d" % i, partition=i % 2)
assert p.flush(30) == 0, "unacknowledged records"


def consumer(group):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    })


# A group reads everything (offsets 1..=15 on each partition) and commits the ends.
c = consumer("tools")
c.subscribe([topic])
read, deadline = 0, time.time() + 60
while read < 30 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        read += 1
c.commit(asynchronous=False)
c.close()
assert read == 30, read


def error_name(f):
    try:
        f.result(30)
        return None
    except KafkaException as e:
        return e.args[0].name()


listing = admin.list_consumer_groups(request_timeout=30).result(60)
out["listed"] = any(g.group_id == "tools" for g in listing.valid)
described = admin.describe_consumer_groups(["tools"])["tools"].result(30)
out["described_state"] = described.state.name

# A member holds both partitions: described as such, and not deletable.
live = consumer("live")
live.subscribe([topic])
deadline = time.time() + 60
while not live.assignment() and time.time() < deadline:
    live.poll(0.5)
d = admin.describe_consumer_groups(["live"])["live"].result(30)
out["live_state"] = d.state.name
out["live_members"] = len(d.members)
out["live_assigned"] = sum(len(m.assignment.topic_partitions) for m in d.members)
out["delete_live"] = error_name(admin.delete_consumer_groups(["live"])["live"])
live.close()

req = [ConsumerGroupTopicPartitions("tools")]
got = admin.list_consumer_group_offsets(req)["tools"].result(30)
out["offsets"] = sorted([tp.partition, tp.offset] for tp in got.topic_partitions)

out["deleted"] = error_name(admin.delete_consumer_groups(["tools"])["tools"]) is None
listing = admin.list_consumer_groups(request_timeout=30).result(60)
out["listed_after_delete"] = any(g.group_id == "tools" for g in listing.valid)
out["delete_again"] = error_name(admin.delete_consumer_groups(["tools"])["tools"])
print(json.dumps(out))
