#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, if any is missing: the
# one list, used by `make test` (its deps step) and by .ci/run. The interop
# tests fail, never skip, when a client is missing, so this runs first.
#
#   make, curl       the test command itself; the README tour test
#   awscli, boto3    real SQS clients nobody here wrote
#   kcat, confluent-kafka, kafka-python   real Kafka clients
#   gcc, libc6-dev   cgo, for confluent-kafka-go's bundled librdkafka 2.11
#                    (internal/kafka/testdata/ckgo848: KIP-848 groups; Debian's
#                    librdkafka 2.0 predates them)
#   openssl          makes the CA and certificates of the TLS tests
#   systemd          systemd-analyze verify checks deploy/sluice.service
#   prometheus       promtool checks and unit-tests deploy/prometheus's alert rules
#   chromium         the web console's browser tests (internal/console, headless)
#   postgresql, mariadb-server   the outbox relay's and the inbox's real
#                    databases (internal/outbox, client/inbox); the tests
#                    start their own servers on temporary directories
#   nodejs, npm      the Node Kafka client (internal/kafka/testdata/node);
#                    only when no node is on PATH: a newer Node from another
#                    repository (it needs Node 20.19+; bookworm ships 18)
#                    must not be replaced by Debian's
set -euo pipefail
pkgs=(make curl gcc libc6-dev openssl awscli python3-boto3 kcat python3-confluent-kafka python3-kafka systemd prometheus chromium postgresql mariadb-server)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "test-deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "test-deps: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
