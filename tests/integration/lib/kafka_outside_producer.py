"""An outside producer for an fsgd job's data topic, with the confluent-kafka
client (not fsgd's code), following trainer/KAFKA_FORMAT.md: one LIBSVM row
per message, no key, round-robin over NAME.data's partitions, lz4, linger 5 ms,
idempotent. After delivery it checks what the spec's loss detection checks:
every partition's log starts at 0 and the high watermarks add up to the rows
written. Prints "produced N rows to P partitions". With $FSGD_JOB_KEY (a job
key file) every row carries its tag in the header fsgd.mac, 64 hex digits
(lib/auth.py row_tag: domain 3 over the partition and the value, bound to the
job NAME of TOPIC NAME.data; KAFKA_FORMAT.md, "Authentication").

usage: kafka_outside_producer.py BROKERS TOPIC LIBSVM_FILE"""
import os
import sys

import auth

from confluent_kafka import KafkaException, Producer, TopicPartition, Consumer


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    brokers, topic, path = sys.argv[1:]
    p = Producer({'bootstrap.servers': brokers, 'enable.idempotence': True, 'compression.type': 'lz4',
                  'linger.ms': 5, 'acks': 'all'})
    meta = p.list_topics(topic, timeout=10).topics[topic]
    if meta.error is not None:
        raise KafkaException(meta.error)
    parts = sorted(meta.partitions)
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    key_path = os.environ.get('FSGD_JOB_KEY')
    key = bytes.fromhex(open(key_path).read().strip()) if key_path else None
    rows = 0
    with open(path, 'rb') as f:
        for line in f:
            line = line.rstrip(b'\r\n')
            if not line.strip() or line.lstrip().startswith(b'#'):
                continue
            while True:
                try:
                    headers = None
                    part = parts[rows % len(parts)]
                    if key:
                        job = topic[:-len('.data')] if topic.endswith('.data') else topic
                        headers = [('fsgd.mac', auth.row_tag(key, job, part, line).hex())]
                    p.produce(topic, value=line, partition=part, on_delivery=delivered,
                              headers=headers)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    p.poll(0.1)
            rows += 1
            p.poll(0)
    left = p.flush(60)
    if left or errors:
        sys.exit('kafka_outside_producer: %d messages undelivered, errors: %s' % (left, errors[:3]))
    c = Consumer({'bootstrap.servers': brokers, 'group.id': 'outside-producer-check'})
    try:
        total = 0
        for part in parts:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
            if lo != 0:
                sys.exit('kafka_outside_producer: %s[%d] log starts at %d, not 0: data lost' % (topic, part, lo))
            total += hi
    finally:
        c.close()
    if total != rows:
        sys.exit('kafka_outside_producer: %s holds %d rows, %d were written' % (topic, total, rows))
    print('produced %d rows to %d partitions' % (rows, len(parts)))


main()
