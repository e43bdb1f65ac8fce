"""kafka-python (a pure-Python client: none of librdkafka's code) against a Skein cluster's
Kafka listeners: its admin client creates TOPIC (2 partitions, RF 3), its producer writes N
records with acks=all, split over the partitions, and its consumer reads offsets: the
beginning and end offsets (ListOffsets), every record from the beginning (Fetch), and a
committed offset read back (OffsetCommit / OffsetFetch through the group coordinator).
Prints one JSON line; the Rust test (node/tests/kafka_kcat.rs) judges it.

usage: kafka_python_offsets.py BOOTSTRAP TOPIC N
"""
import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

bootstrap, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
KafkaAdminClient(bootstrap_servers=bootstrap).create_topics([NewTopic(topic, 2, 3)])
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
for i in range(n):
    p.send(topic, value=f"v{i}".encode(), partition=i % 2)
p.flush(60)

c = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kafka-python",
                  enable_auto_commit=False)
tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
out = {
    "beginning": [c.beginning_offsets(tps)[tp] for tp in tps],
    "end": [c.end_offsets(tps)[tp] for tp in tps],
}
c.assign(tps)
c.seek_to_beginning()
read = []
while len(read) < n:
    batch = c.poll(timeout_ms=10_000)
    if not batch:
        break
    for tp, records in sorted(batch.items()):
        read += [[tp.partition, r.offset, r.value.decode()] for r in records]
out["read"] = read
last = max(r[1] for r in read if r[0] == 0) + 1
c.commit({tps[0]: OffsetAndMetadata(last, None, -1)})
out["committed"] = [last, c.committed(tps[0])]
c.close()
print(json.dumps(out))
