#!/usr/bin/env bash
# W1 (durable produce, 1 KiB, 256 in flight, 10 s, --fsync always) over
# Kafka, plaintext and SASL SCRAM-SHA-256 alternated ROUNDS times (default
# 3) on fresh data directories: what authentication costs a producer.
# Run by hand (not in CI): bench/kafka-sasl-w1.sh; results in $WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-39092}
HTTP=${HTTP:-38080}
go build -o "$WORK/sluice" ./cmd/sluice
go build -o "$WORK/sluice-bench" ./cmd/sluice-bench
cat >"$WORK/users.yaml" <<'YAML'
users:
  - {name: bench, password: bench-secret}
acls:
  - {user: bench, allow: [all], resources: ["*"]}
YAML
chmod 600 "$WORK/users.yaml"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; true' EXIT
for round in $(seq "$ROUNDS"); do
  for mode in plain scram; do
    rm -rf "$WORK/data"
    serve=(); bench=()
    if [ "$mode" = scram ]; then
      serve=(--auth-file "$WORK/users.yaml")
      bench=(--kafka-sasl-mechanism SCRAM-SHA-256 --kafka-sasl-user bench --kafka-sasl-password bench-secret)
    fi
    "$WORK/sluice" serve --data-dir "$WORK/data" --kafka-addr "127.0.0.1:$PORT" --http-addr "127.0.0.1:$HTTP" \
      --sqs-addr "" --fsync always "${serve[@]}" >"$WORK/serve-$mode-$round.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$HTTP/readyz" >/dev/null && break; sleep 0.2; done
    "$WORK/sluice-bench" produce --protocol kafka --kafka-addr "127.0.0.1:$PORT" --size 1024 --in-flight 256 \
      --batch 1 --duration 10s --count 100000000 --probe-dir "" --quiet "${bench[@]}" --output json \
      >"$WORK/w1-$mode-$round.json"
    kill "$pid"; wait "$pid" || true; pid=
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['result']; print(sys.argv[2], sys.argv[3], round(r['msgs_per_sec']), 'msgs/s, p50', round(r['latency']['p50_ms'],2), 'ms, p99', round(r['latency']['p99_ms'],2), 'ms')" \
      "$WORK/w1-$mode-$round.json" "$mode" "$round"
  done
done
echo "results in $WORK"
