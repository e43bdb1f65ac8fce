"""confluent-kafka (librdkafka) against a Skein cluster's Kafka listeners, once per codec:
a producer with compression.type=CODEC (acks=all, batches of many records) writes N
records to TOPIC-CODEC, then a consumer with explicit assignment reads partition 0 from
the beginning. Prints one JSON line: per codec, the values acknowledged and read, in order.

usage: confluent_compression.py BOOTSTRAP TOPIC N CODEC...
"""
import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic, n, codecs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
result = {}
for codec in codecs:
    name = f"{topic}-{codec}"
    acked, errors = [], []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value().decode())

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 20,
        "batch.num.messages": 500,
    })
    for i in range(n):
        # Compressible values: a shared prefix and padding.
        p.produce(name, value=f"{codec}-{i:06d}-" + "x" * 100, partition=0,
                  on_delivery=delivered)
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        raise SystemExit(f"{codec}: {left} undelivered, errors {errors[:3]}")

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"unused-{codec}",
        "enable.auto.commit": False,
        "check.crcs": True,
    })
    c.assign([TopicPartition(name, 0, 0)])
    read = []
    idle = 0
    while len(read) < n and idle < 30:
        msgs = c.consume(500, 1.0)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            read.append(m.value().decode())
    c.close()
    result[codec] = {"acked": acked, "read": read}

print(json.dumps(result))
