"""Transactions through librdkafka (confluent-kafka-python): a transactional
producer commits one transaction and aborts another; consumers with
isolation.level read_committed and read_uncommitted read the topic back.

Usage: pytxn.py BOOTSTRAP TOPIC COUNT
Prints "committed <values...>" and "uncommitted <n>" lines.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "py-txn",
              "transaction.timeout.ms": 60000})
p.init_transactions(30)
p.begin_transaction()
for i in range(count):
    p.produce(topic, key=str(i % 5), value="commit-%d" % i)
p.commit_transaction(30)
p.begin_transaction()
for i in range(count):
    p.produce(topic, key=str(i % 5), value="abort-%d" % i)
p.flush(30)
p.abort_transaction(30)
p.begin_transaction()
p.produce(topic, key="x", value="commit-last")
p.commit_transaction(30)


def read(level):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-" + level,
                  "auto.offset.reset": "earliest", "isolation.level": level,
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, idle = [], 0
    deadline = time.time() + 60
    while idle < 6 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            idle += 1 if got else 0
            continue
        if m.error():
            continue
        idle = 0
        got.append(m.value().decode())
    c.close()
    return got


committed = read("read_committed")
print("committed " + " ".join(committed))
print("uncommitted %d" % len(read("read_uncommitted")))
