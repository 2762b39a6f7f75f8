#!/usr/bin/env bash
# bench/security/run.sh — what security costs, in one run: W1 (durable
# produce, 1 KiB, 256 in flight) over Kafka and W2 (queue round trip) over
# SQS, each four ways, alternated ROUNDS times so every row sees the same
# machine:
#
#   open      no --auth-file, plaintext listener
#   tls       no --auth-file, TLS listener
#   auth      --auth-file (Kafka SASL SCRAM-SHA-256, SQS SigV4), plaintext
#   auth+tls  --auth-file over the TLS listener (what a secure setup runs)
#
# Two `sluice serve` (--fsync always), one without and one with the users
# file, each with a plaintext and a TLS twin of each listener. Run by hand,
# never in CI: bench/security/run.sh [--rounds N] [--duration 10s].
# Needs openssl. The broker CPU column (µs per message, from /proc) holds
# still when the machine is shared; msgs/s does not.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
ROUNDS=2 DUR=10s
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift ;;
    --duration) DUR=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--duration 10s]" >&2; exit 2 ;;
  esac
  shift
done
WORK=$(mktemp -d /tmp/sluice-secbench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$WORK/sluice" ./cmd/sluice
go build -o "$WORK/sluice-bench" ./cmd/sluice-bench
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc -days 2 -keyout ca.key -out ca.crt \
  -subj /CN=bench-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc -keyout tls.key -out tls.csr -subj /CN=sluice 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -set_serial 1 -days 2 -extfile tls.ext -out tls.crt 2>/dev/null

echo -n bench-secret | ./sluice user add bench --password-stdin --auth-file users.yaml >/dev/null
keys=$(./sluice user access-key bench --auth-file users.yaml)
export BENCH_KEY_ID=$(echo "$keys" | awk '/[Ii][Dd]/ {print $NF; exit}')
export BENCH_SECRET=$(echo "$keys" | awk '/[Ss]ecret/ {print $NF; exit}')
./sluice acl add --user bench --allow all --resource '*' --auth-file users.yaml >/dev/null

# serve NAME HTTP KAFKA KAFKA_TLS SQS SQS_TLS [extra flags…]
serve() {
  local name=$1 http=$2 k=$3 kt=$4 s=$5 st=$6; shift 6
  ./sluice serve --data-dir "$WORK/$name" --fsync always --log-level warn \
    --http-addr "127.0.0.1:$http" --kafka-addr "127.0.0.1:$k" --sqs-addr "127.0.0.1:$s" \
    --kafka-tls-addr "127.0.0.1:$kt" --sqs-tls-addr "127.0.0.1:$st" \
    --tls-cert tls.crt --tls-key tls.key "$@" 2>"$WORK/$name.log" &
  PIDS+=($!)
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$http/readyz" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "$name did not get ready:" >&2; cat "$WORK/$name.log" >&2; exit 1
}
serve open 28080 29092 29093 29324 29325
OPEN_PID=${PIDS[0]}
serve auth 38080 39092 39093 39324 39325 --auth-file users.yaml
AUTH_PID=${PIDS[1]}

W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
SCRAM=(--kafka-sasl-mechanism SCRAM-SHA-256 --kafka-sasl-user bench --kafka-sasl-password bench-secret)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() { # label, broker pid, sluice-bench args…
  local label=$1 pid=$2; shift 2
  local json before after
  before=$(cpu "$pid")
  json=$(./sluice-bench "$@" --probe-dir "" --quiet -o json)
  after=$(cpu "$pid")
  echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
l = r["latency"]
msgs = max(r["sent"] if sys.argv[3] == "produce" else r["received"], 1)
cpu_us = (int(sys.argv[5]) - int(sys.argv[4])) * 10000 / msgs
print("| %s | %s | %.0f | %.2f | %.2f | %.1f |" % (sys.argv[1], sys.argv[2], r["msgs_per_sec"], l["p50_ms"], l["p99_ms"], cpu_us))
' "$label" "$(cut -d' ' -f1 /proc/loadavg)" "$1" "$before" "$after"
}
echo "| run | load avg | msgs/s | p50 ms | p99 ms | broker CPU µs/msg |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  run "W1 Kafka open #$r" "$OPEN_PID" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:29092 --name "w1o$r"
  run "W1 Kafka tls #$r" "$OPEN_PID" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:29093 --tls-ca ca.crt --name "w1t$r"
  run "W1 Kafka scram #$r" "$AUTH_PID" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:39092 "${SCRAM[@]}" --name "w1s$r"
  run "W1 Kafka scram+tls #$r" "$AUTH_PID" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:39093 --tls-ca ca.crt "${SCRAM[@]}" --name "w1st$r"
  run "W2 SQS open #$r" "$OPEN_PID" "${W2[@]}" --protocol sqs --sqs-url http://127.0.0.1:29324 --name "w2o$r"
  run "W2 SQS tls #$r" "$OPEN_PID" "${W2[@]}" --protocol sqs --sqs-url https://127.0.0.1:29325 --tls-ca ca.crt --name "w2t$r"
  AWS_ACCESS_KEY_ID=$BENCH_KEY_ID AWS_SECRET_ACCESS_KEY=$BENCH_SECRET \
    run "W2 SQS sigv4 #$r" "$AUTH_PID" "${W2[@]}" --protocol sqs --sqs-url http://127.0.0.1:39324 --name "w2s$r"
  AWS_ACCESS_KEY_ID=$BENCH_KEY_ID AWS_SECRET_ACCESS_KEY=$BENCH_SECRET \
    run "W2 SQS sigv4+tls #$r" "$AUTH_PID" "${W2[@]}" --protocol sqs --sqs-url https://127.0.0.1:39325 --tls-ca ca.crt --name "w2st$r"
done
