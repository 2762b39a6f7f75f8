#!/usr/bin/env bash
# bench/tls/run.sh — the cost of TLS: W1 (durable produce) over Kafka and
# W2 (queue round trip) over SQS, each through the plaintext listener and
# its TLS twin of ONE `sluice serve` (--fsync always), alternated ROUNDS
# times so both see the same machine. Run by hand; never in CI.
#
#   bench/tls/run.sh [--rounds N] [--duration 10s]
#
# Needs openssl (the CA and the server's certificate are made in a
# temporary folder, removed at exit with the broker's data). Prints one
# table row per run (msgs/s, p50, p99) and the sluice-bench JSON lines to
# $OUT if set.
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
WORK=$(mktemp -d /tmp/sluice-tlsbench.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
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

./sluice serve --data-dir "$WORK/data" --fsync always --log-level warn \
  --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 \
  --kafka-tls-addr 127.0.0.1:19093 --sqs-tls-addr 127.0.0.1:19325 \
  --tls-cert tls.crt --tls-key tls.key 2>"$WORK/serve.log" &
PID=$!
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break
  sleep 0.1
done

W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
# cpu: the broker's user+system CPU ticks so far (1/100 s). CPU per message
# is what TLS costs the broker, and unlike msgs/s it holds still when the
# machine is shared.
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
run() { # label, sluice-bench args…
  local label=$1; shift
  local json before after
  before=$(cpu)
  json=$(./sluice-bench "$@" --server http://127.0.0.1:18080 --probe-dir "" --quiet -o json)
  after=$(cpu)
  [ -n "${OUT:-}" ] && echo "$json" | tr -d '\n' >> "$OUT" && echo >> "$OUT"
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
  run "W1 Kafka plaintext #$r" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:19092 --name w1-plain
  run "W1 Kafka TLS #$r" "${W1[@]}" --protocol kafka --kafka-addr 127.0.0.1:19093 --tls-ca ca.crt --name w1-tls
  run "W2 SQS plaintext #$r" "${W2[@]}" --protocol sqs --sqs-url http://127.0.0.1:19324 --name w2-plain
  run "W2 SQS TLS #$r" "${W2[@]}" --protocol sqs --sqs-url https://127.0.0.1:19325 --tls-ca ca.crt --name w2-tls
done
# Connections each listener accepted over the whole run: a TLS row that
# opened many more than its plaintext twin paid for handshakes.
echo
curl -fsS http://127.0.0.1:18080/metrics | grep -E '^sluice_(connections_accepted_total|tls_handshake_errors_total)\{listener="(kafka|sqs)'
