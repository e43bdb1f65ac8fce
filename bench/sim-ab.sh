#!/usr/bin/env bash
# Side-by-side wall-clock runs of `skein sim bench` for several builds in one sitting
# (docs/PERFORMANCE.md, "Simulator"): round 1 runs the builds in the order given, round 2
# in reverse, and so on (ABC, CBA, ...), so a machine that speeds up or slows down during
# the sitting does not favour one build. Prints every run, then per build the min / median
# / max of events/s and of simulated seconds per wall second.
#
#   bench/sim-ab.sh ROUNDS BINARY [BINARY...] [-- BENCH ARGS...]
#   bench/sim-ab.sh 6 /tmp/skein-old target/release/skein
#   bench/sim-ab.sh 4 /tmp/skein-old target/release/skein -- --seeds 1 --duration 30s
#
# Build each binary first (`cargo build --release -p skein-node`, copied aside per commit).
# Check `uptime` before: the figures mean something on an idle machine only.
set -euo pipefail

usage() {
  echo "usage: $0 ROUNDS BINARY [BINARY...] [-- BENCH ARGS...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
rounds=$1
shift
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2; }
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [ -x "$1" ] || { echo "not an executable: $1 (build it first)" >&2; exit 2; }
  bins+=("$1")
  shift
done
[ ${#bins[@]} -ge 1 ] || usage
[ $# -gt 0 ] && shift # the "--"
args=("$@")

echo "load at start: $(uptime | sed 's/.*load average: //')"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for r in $(seq 1 "$rounds"); do
  order=("${bins[@]}")
  if [ $((r % 2)) = 0 ]; then
    order=()
    for ((i = ${#bins[@]} - 1; i >= 0; i--)); do order+=("${bins[$i]}"); done
  fi
  for bin in "${order[@]}"; do
    total=$("$bin" sim bench "${args[@]}" 2>&1 | grep '^total:') || {
      echo "$bin sim bench printed no total line" >&2
      exit 1
    }
    # total: 854011 events/s, 69.2 simulated seconds per wall second (...)
    ev=$(echo "$total" | sed -E 's/^total: ([0-9]+) events.*/\1/')
    ss=$(echo "$total" | sed -E 's/^total: [0-9]+ events\/s, ([0-9.]+) simulated.*/\1/')
    echo "round $r  $bin  $ev events/s  $ss sim-s/wall-s"
    printf '%s\t%s\t%s\n' "$bin" "$ev" "$ss" >>"$runs"
  done
done
echo "load at end: $(uptime | sed 's/.*load average: //')"

# min / median / max of column $2 over the lines of build $1 (the median of an even count is
# the mean of the middle two).
summary() {
  awk -F'\t' -v b="$1" '$1 == b { print $'"$2"' }' "$runs" | sort -g | awk '
    { v[NR] = $1 }
    END {
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%s / %s / %s", v[1], m, v[NR]
    }'
}
echo "build: events/s (min / median / max); sim-s per wall-s (min / median / max)"
for bin in "${bins[@]}"; do
  echo "$bin: $(summary "$bin" 2); $(summary "$bin" 3)"
done
