#!/usr/bin/env bash
# bench/node.sh: the node figures of docs/PERFORMANCE.md ("Node") in one command: a real
# 3-broker cluster (`skein cluster up`, 3 controllers, fsync = always) on this machine,
# `skein bench produce|consume` against it, each case RUNS times on a fresh cluster, and a
# table of min / median / max (issue 15: acks=all >= 150,000 records/s at peak, p99 < 20 ms
# at half of peak).
#
# Cases (100-byte records, topic `bench`: 3 partitions, RF 3, min.insync.replicas 2):
#   peak-acks1    1,000,000 records, acks=1,   8 producers x 5000-record batches, unpaced
#   peak-all      1,000,000 records, acks=all, 8 producers x 2000-record batches, unpaced
#   peak-all-500    600,000 records, acks=all, 8 producers x 500-record batches, unpaced
#   half-all-500  acks=all, 8 x 500, paced at half of peak-all-500's median (10 s of records)
#   consume       2,000,000 records produced (acks=1), then read by one client per partition
# Optional cases (not in the default list; issue 52, transactional vs idempotent):
#   idem-500        600,000 records, idempotent producers (acks=all), 8 x 500, unpaced
#   txn-500         the same with transactional producers committing every 100 ms
# Run it on an idle machine (it prints the load average before and after).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=3
CASES="peak-acks1 peak-all peak-all-500 half-all-500 consume"
KEEP=0
DIV=1 # --quick: a tenth of the records

usage() {
  cat <<EOF
usage: bench/node.sh [--runs N] [--cases "peak-acks1 peak-all peak-all-500 half-all-500 consume idem-500 txn-500"] [--keep]
  --runs   runs per case, each on a fresh cluster (default $RUNS)
  --cases  which cases, in order (half-all-500 needs peak-all-500 before it)
  --keep   keep the temp dir with every log and raw output
  --quick  a smoke run: a tenth of the records in every case
EOF
}
die() {
  echo "node.sh: $*" >&2
  exit 1
}
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="${2:?--runs needs a number}"; shift ;;
    --cases) CASES="${2:?--cases needs a list}"; shift ;;
    --keep) KEEP=1 ;;
    --quick) DIV=10 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
case "$RUNS" in '' | *[!0-9]* | 0) die "--runs wants a positive number, got '$RUNS'" ;; esac
for c in $CASES; do
  case "$c" in peak-acks1 | peak-all | peak-all-500 | half-all-500 | consume | idem-500 | txn-500) ;; *) die "unknown case $c" ;; esac
done
case " $CASES " in
  *" half-all-500 "*) case " $CASES " in *" peak-all-500 "*) ;; *) die "half-all-500 needs peak-all-500 in --cases (its rate is half that peak)" ;; esac ;;
esac

WORK=$(mktemp -d -t skein-node-bench.XXXXXX)
UP=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$UP" ] && "$SKEIN" cluster down --dir "$UP" >/dev/null 2>&1 || true
  if [ "$KEEP" = 1 ] || [ "$rc" != 0 ]; then echo "logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
echo "building skein (release)" >&2
(cd "$ROOT" && cargo build --release -q -p skein-node) || die "cargo build failed"
SKEIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/skein"
[ -x "$SKEIN" ] || die "no $SKEIN after the build"

# one DIR ARGS...: starts a fresh cluster in DIR, runs `skein bench ARGS` against it (a `--`
# in ARGS starts a second `skein bench` command run after the first), output to DIR.out,
# then stops the cluster.
one() {
  local d=$1 a=() arg
  shift
  mkdir -p "$d"
  UP="$d"
  "$SKEIN" cluster up --brokers 3 --dir "$d" --fsync always >"$d/up.log" 2>&1 \
    || { cat "$d/up.log" >&2; die "cluster did not come up (logs in $d)"; }
  for arg in "$@" --; do
    if [ "$arg" = -- ]; then
      "$SKEIN" bench "${a[@]}" --cluster "$d/cluster.toml" >>"$d.out" 2>>"$d/bench.err" \
        || { cat "$d/bench.err" >&2; die "skein bench ${a[*]} failed (logs in $d)"; }
      a=()
    else
      a+=("$arg")
    fi
  done
  "$SKEIN" cluster down --dir "$d" >/dev/null 2>&1 || true
  UP=""
}

# field FILE KIND WHAT: records/s or p50/p99/p99.9 from the lines starting with KIND.
field() {
  case "$3" in
    rps) sed -n "s/^$2: .*: \([0-9.]*\) records\/s.*/\1/p" "$1" ;;
    *) sed -n "s/^$2 latency.* $3 \([0-9.]*\) ms.*/\1/p" "$1" ;;
  esac
}
# stats: min / median / max of the numbers on stdin.
stats() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    printf "%s / %s / %s", v[1], v[int((NR + 1) / 2)], v[NR] }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

declare -A ROW
HALF_RATE=""
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for c in $CASES; do
  for i in $(seq "$RUNS"); do
    d="$WORK/$c-$i"
    echo "[$(date -u +%H:%M:%S)] $c run $i" >&2
    case "$c" in
      peak-acks1) one "$d" produce --records $((1000000 / DIV)) --acks 1 --producers 8 --batch 5000 ;;
      peak-all) one "$d" produce --records $((1000000 / DIV)) --acks all --producers 8 --batch 2000 ;;
      peak-all-500) one "$d" produce --records $((600000 / DIV)) --acks all --producers 8 --batch 500 ;;
      half-all-500)
        one "$d" produce --records $((HALF_RATE * 10 / DIV)) --acks all --producers 8 --batch 500 --rate "$HALF_RATE"
        ;;
      idem-500) one "$d" produce --records $((600000 / DIV)) --acks all --producers 8 --batch 500 --idempotent ;;
      txn-500)
        one "$d" produce --records $((600000 / DIV)) --acks all --producers 8 --batch 500 --transactional --commit-interval-ms 100
        ;;
      consume)
        one "$d" produce --records $((2000000 / DIV)) --acks 1 --producers 8 --batch 5000 -- consume --records $((2000000 / DIV))
        ;;
    esac
  done
  kind=produce
  [ "$c" = consume ] && kind=consume
  cat "$WORK/$c"-*.out >"$WORK/$c.all"
  if [ "$c" = consume ]; then grep '^consume' "$WORK/$c.all" >"$WORK/$c.sel" || true; else cp "$WORK/$c.all" "$WORK/$c.sel"; fi
  ROW[$c]="$(field "$WORK/$c.sel" "$kind" rps | stats) | $(field "$WORK/$c.sel" "$kind" p50 | stats) | $(field "$WORK/$c.sel" "$kind" p99 | stats)"
  if [ "$c" = peak-all-500 ]; then
    HALF_RATE=$(field "$WORK/$c.sel" produce rps | median | awk '{ printf "%d", $1 / 2 }')
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "| case | records/s (min / median / max of $RUNS) | p50 ms | p99 ms |"
echo "|---|---|---|---|"
for c in $CASES; do
  label=$c
  [ "$c" = half-all-500 ] && label="half-all-500 (at $HALF_RATE/s)"
  echo "| $label | ${ROW[$c]} |"
done
