# Start and stop functions of bench/compare/run.sh, one pair per broker.
# Each start_* launches the broker on 127.0.0.1 with its data under $WORK,
# waits until it accepts connections, sets ADDR (host:port) and BPID (the
# process whose memory W4 reads), and registers how to stop it with
# on_exit, so the trap in run.sh stops everything this run started.
# shellcheck shell=bash

free_port() {
  local p
  for p in $(shuf -i 20000-45000 -n 100); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port" >&2; return 1
}

wait_port() { # port seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1 after $2 s" >&2; return 1
}

# stop_pid PID: SIGTERM, then SIGKILL after 30 s.
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# stop_current runs and forgets the stop command of the broker started last.
stop_current() {
  if [ -n "${CURRENT_STOP:-}" ]; then eval "$CURRENT_STOP" || true; fi
  CURRENT_STOP=""
}

start_sluice() { # fsync-policy
  local d; d=$(mktemp -d "$WORK/sluice.XXXX")
  local ph pk ps; ph=$(free_port); pk=$(free_port); ps=$(free_port)
  "$WORK/bin/sluice" serve --data-dir "$d/data" --http-addr "127.0.0.1:$ph" --kafka-addr "127.0.0.1:$pk" \
    --sqs-addr "127.0.0.1:$ps" --fsync "$1" >"$d/log" 2>&1 &
  BPID=$!
  CURRENT_STOP="stop_pid $BPID"
  LOGF=$d/log
  wait_port "$ph" 20 && wait_port "$pk" 5 && wait_port "$ps" 5 || return 1
  # --native-batches: native topic publishes go as record batches the client built (the
  # Publisher's RecordBatches), the native path's fastest; it changes nothing else.
  SLUICE_FLAGS=(--server "http://127.0.0.1:$ph" --kafka-addr "127.0.0.1:$pk" --sqs-url "http://127.0.0.1:$ps" --native-batches)
}

start_nats() { # sync_interval ("" for the default)
  local d; d=$(mktemp -d "$WORK/nats.XXXX")
  local p; p=$(free_port)
  {
    echo "listen: 127.0.0.1:$p"
    echo "jetstream {"
    echo "  store_dir: \"$d/js\""
    [ -n "$1" ] && echo "  sync_interval: $1"
    echo "}"
  } >"$d/nats.conf"
  "$WORK/bin/nats-server" -c "$d/nats.conf" >"$d/log" 2>&1 &
  BPID=$!
  CURRENT_STOP="stop_pid $BPID"
  LOGF=$d/log
  wait_port "$p" 20 || return 1
  ADDR=127.0.0.1:$p
}

start_redis() { # appendfsync policy
  local d; d=$(mktemp -d "$WORK/redis.XXXX")
  local p; p=$(free_port)
  redis-server --bind 127.0.0.1 --port "$p" --dir "$d" --appendonly yes --appendfsync "$1" \
    --save "" --daemonize no --protected-mode yes >"$d/log" 2>&1 &
  BPID=$!
  CURRENT_STOP="stop_pid $BPID"
  LOGF=$d/log
  wait_port "$p" 20 || return 1
  ADDR=127.0.0.1:$p
}

# RabbitMQ runs as this user with its node, database, logs, cookie and
# epmd all private to the run; epmd listens on 127.0.0.1 only and is
# stopped with the node.
start_rabbitmq() {
  local d; d=$(mktemp -d "$WORK/rabbitmq.XXXX")
  local p dist epmd; p=$(free_port); dist=$(free_port); epmd=$(free_port)
  mkdir -p "$d/home" "$d/log" "$d/mnesia"
  echo "[]." >"$d/enabled_plugins"
  printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users.guest = true\n' "$p" >"$d/rabbitmq.conf"
  RABBIT_ENV=(HOME="$d/home" ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$epmd"
    RABBITMQ_NODENAME="sluicecmp@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$p"
    RABBITMQ_DIST_PORT="$dist" RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log"
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins"
    RABBITMQ_PID_FILE="$d/pid")
  env "${RABBIT_ENV[@]}" setsid /usr/lib/rabbitmq/bin/rabbitmq-server >"$d/stdout" 2>&1 &
  local wrapper=$!
  CURRENT_STOP="stop_rabbitmq $wrapper $d"
  LOGF=$d/stdout
  wait_port "$p" 120 || return 1
  BPID=$(cat "$d/pid")
  ADDR=127.0.0.1:$p
}

stop_rabbitmq() { # wrapper-pid dir
  env "${RABBIT_ENV[@]}" /usr/lib/rabbitmq/bin/rabbitmqctl -n sluicecmp@localhost shutdown >/dev/null 2>&1 || true
  [ -f "$2/pid" ] && stop_pid "$(cat "$2/pid")"
  stop_pid "$1"
  # epmd was started for this node on its own port; ask it to exit.
  env "${RABBIT_ENV[@]}" epmd -kill >/dev/null 2>&1 || true
}

# PostgreSQL refuses to run as root: the cluster belongs to the postgres
# user, in a folder of $WORK.
start_postgres() {
  local d; d=$(mktemp -d "$WORK/postgres.XXXX")
  local p; p=$(free_port)
  chown postgres "$d"
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  LOGF=$d/log
  runuser -u postgres -- "$bin/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 >"$d/initdb.log" || return 1
  runuser -u postgres -- "$bin/pg_ctl" -D "$d/data" -l "$d/log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $p -c unix_socket_directories=$d -c synchronous_commit=on -c fsync=on -c max_connections=400" >/dev/null || return 1
  CURRENT_STOP="runuser -u postgres -- $bin/pg_ctl -D $d/data -m fast -w stop >/dev/null"
  BPID=$(head -1 "$d/data/postmaster.pid")
  ADDR=127.0.0.1:$p
}
