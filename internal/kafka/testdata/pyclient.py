"""Produce and group-consume through one Python Kafka client library.

usage: pyclient.py confluent|kafka-python BOOTSTRAP TOPIC GROUP COUNT

Produces COUNT records "key<i%7>" -> "<lib>-<i>", then consumes COUNT
records with a consumer group from the earliest offset, committing, and
prints each as "key:value" on stdout. Exits non-zero on any error or if
fewer than COUNT records arrive within 60 seconds.

With SASL_MECHANISM, SASL_USERNAME and SASL_PASSWORD in the environment
the client authenticates (security.protocol SASL_PLAINTEXT).
"""
import os
import sys
import time


def sasl_confluent():
    m = os.environ.get("SASL_MECHANISM")
    if not m:
        return {}
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": m,
            "sasl.username": os.environ["SASL_USERNAME"], "sasl.password": os.environ["SASL_PASSWORD"]}


def sasl_kafka_python():
    m = os.environ.get("SASL_MECHANISM")
    if not m:
        return {}
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": m,
            "sasl_plain_username": os.environ["SASL_USERNAME"], "sasl_plain_password": os.environ["SASL_PASSWORD"]}


def confluent(bootstrap, topic, group, count):
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **sasl_confluent()})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(count):
        p.produce(topic, key="key%d" % (i % 7), value="confluent-%d" % i, on_delivery=report)
    if p.flush(30) != 0 or errors:
        raise SystemExit("produce failed: %r" % errors)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **sasl_confluent()})
    c.subscribe([topic])
    got = 0
    deadline = time.time() + 60
    while got < count and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise SystemExit("consume failed: %s" % m.error())
        print("%s:%s" % (m.key().decode(), m.value().decode()))
        got += 1
    c.commit(asynchronous=False)
    c.close()
    return got


def kafka_python(bootstrap, topic, group, count):
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **sasl_kafka_python())
    futures = [p.send(topic, key=b"key%d" % (i % 7), value=b"kafka-python-%d" % i) for i in range(count)]
    p.flush(30)
    for f in futures:
        f.get(timeout=30)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False, **sasl_kafka_python())
    got = 0
    deadline = time.time() + 60
    while got < count and time.time() < deadline:
        for recs in c.poll(timeout_ms=1000).values():
            for m in recs:
                print("%s:%s" % (m.key.decode(), m.value.decode()))
                got += 1
    c.commit()
    c.close()
    return got


def main():
    lib, bootstrap, topic, group, count = sys.argv[1:6]
    fn = {"confluent": confluent, "kafka-python": kafka_python}[lib]
    got = fn(bootstrap, topic, group, int(count))
    if got != int(count):
        raise SystemExit("consumed %d of %s" % (got, count))


if __name__ == "__main__":
    main()
