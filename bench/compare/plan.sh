# The rows of bench/compare/run.sh: which system, in which settings,
# through which protocol. Sourced by run.sh, which defines bench, w123, w4
# and the start_* functions.
# shellcheck shell=bash

SLUICE_ALWAYS="fsynced before the ack (concurrent writes share one fdatasync)"
SLUICE_5MS="written to the page cache; fdatasync within 5 ms after the ack"
NATS_DEFAULT="written to the page cache; JetStream fsyncs every 2 min (default sync_interval)"
NATS_ALWAYS="fsynced before the PubAck (sync_interval: always)"
RABBIT_QUORUM="fsynced to the quorum queue's Raft log before the confirm (single node)"
RABBIT_CLASSIC="persistent message fsynced by the message store before the confirm"
REDIS_ALWAYS="appended to the AOF and fsynced before the reply (appendfsync always)"
REDIS_EVERYSEC="appended to the AOF in the page cache; fsync once a second (appendfsync everysec)"
PG="WAL flushed before the commit returns (synchronous_commit=on, fsync=on)"

# W4 measures memory, not durability: where a broker has a setting that
# does not sync before the ack, its backlog is written with that one, so
# the fill takes seconds rather than minutes; what each keeps in memory for
# a waiting message does not depend on it.
PEER_FLAGS=()
for sys in $ONLY; do
  case $sys in
  sluice)
    for fs in always 5ms; do
      sync=yes dur=$SLUICE_ALWAYS
      [ "$fs" = 5ms ] && sync=no dur=$SLUICE_5MS
      started "sluice --fsync $fs" start_sluice "$fs" || continue
      w123 sluice "fsync $fs" "kafka native sqs" "native sqs" "native kafka sqs" "$sync" "$dur"
      stop_current
    done
    started "sluice --fsync 5ms" start_sluice 5ms && w4 sluice "fsync 5ms" native no "$SLUICE_5MS"
    stop_current
    profile W1
    profile W2
    ;;
  nats)
    for si in default always; do
      sync=no dur=$NATS_DEFAULT
      [ "$si" = always ] && sync=yes dur=$NATS_ALWAYS
      started "nats-server (sync_interval $si)" start_nats "$([ "$si" = always ] && echo always)" || continue
      w123 nats "sync_interval $si" nats nats nats "$sync" "$dur"
      stop_current
    done
    started "nats-server" start_nats "" && w4 nats "sync_interval default" nats no "$NATS_DEFAULT"
    stop_current
    ;;
  rabbitmq)
    if started "rabbitmq-server" start_rabbitmq; then
      for qt in quorum classic; do
        PEER_FLAGS=(--rabbit-queue-type "$qt")
        dur=$RABBIT_QUORUM
        [ "$qt" = classic ] && dur=$RABBIT_CLASSIC
        w123 rabbitmq "$qt queue" amqp amqp amqp yes "$dur"
      done
      stop_current
    fi
    for qt in quorum classic; do
      PEER_FLAGS=(--rabbit-queue-type "$qt")
      dur=$RABBIT_QUORUM
      [ "$qt" = classic ] && dur=$RABBIT_CLASSIC
      started "rabbitmq-server" start_rabbitmq && w4 rabbitmq "$qt queue" amqp yes "$dur"
      stop_current
    done
    PEER_FLAGS=()
    ;;
  redis)
    for pol in always everysec; do
      sync=yes dur=$REDIS_ALWAYS
      [ "$pol" = everysec ] && sync=no dur=$REDIS_EVERYSEC
      started "redis-server (appendfsync $pol)" start_redis "$pol" || continue
      w123 redis "appendfsync $pol" resp resp resp "$sync" "$dur"
      stop_current
    done
    started "redis-server" start_redis everysec && w4 redis "appendfsync everysec" resp no "$REDIS_EVERYSEC"
    stop_current
    ;;
  postgres)
    if started "postgres" start_postgres; then
      w123 postgres "synchronous_commit on" sql sql sql yes "$PG"
      stop_current
    fi
    started "postgres" start_postgres && w4 postgres "synchronous_commit on" sql yes "$PG"
    stop_current
    ;;
  *) fail "unknown system $sys" ;;
  esac
done
