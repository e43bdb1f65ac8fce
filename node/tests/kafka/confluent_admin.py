"""confluent-kafka's AdminClient against a Skein cluster's Kafka listeners: CreateTopics
with configs, DescribeConfigs of that topic (the values set, the defaults marked as
defaults), DeleteTopics, then Metadata no longer lists it. Prints one JSON line with what it
saw; the Rust test (node/tests/kafka_kcat.rs) judges it.

usage: confluent_admin.py BOOTSTRAP TOPIC
"""
import json
import sys
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
a = AdminClient({"bootstrap.servers": bootstrap})
out = {}

new = NewTopic(topic, num_partitions=2, replication_factor=3,
               config={"retention.ms": "3600000", "min.insync.replicas": "2"})
a.create_topics([new])[topic].result(30)
out["created"] = True

res = ConfigResource(ConfigResource.Type.TOPIC, topic)
entries = a.describe_configs([res])[res].result(30)
out["configs"] = {name: [e.value, e.is_default, e.is_read_only] for name, e in entries.items()}

missing = ConfigResource(ConfigResource.Type.TOPIC, topic + "-missing")
try:
    a.describe_configs([missing])[missing].result(30)
    out["missing"] = "no error"
except KafkaException as e:
    out["missing"] = e.args[0].name()

a.delete_topics([topic])[topic].result(30)
out["deleted"] = True
# Deletion is applied by the controller; metadata follows within a heartbeat.
deadline = time.time() + 20
while time.time() < deadline:
    if topic not in a.list_topics(timeout=10).topics:
        break
    time.sleep(0.2)
out["listed_after_delete"] = topic in a.list_topics(timeout=10).topics
print(json.dumps(out))
