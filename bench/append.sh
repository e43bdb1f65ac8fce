#!/usr/bin/env bash
# Log append bandwidth against the disk's own, measured in the same run (issue 15):
# each round runs `dd oflag=direct` (1 GiB of 1 MiB writes, one fsync), the O_DIRECT append
# benchmarks of node/benches/log.rs, then dd again, and prints each benchmark's median
# throughput as a share of the mean of the two dd runs around it.
#
#   bench/append.sh            # 3 rounds, files under $SKEIN_BENCH_DIR or /tmp
#   ROUNDS=5 bench/append.sh
#
# The virtio disk of the reference VM varies 2x from run to run, so only ratios taken in the
# same round mean much; see docs/PERFORMANCE.md "Storage".
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SKEIN_BENCH_DIR:-/tmp}
rounds=${ROUNDS:-3}
filter=${FILTER:-log/append_.*direct_io}
log=$(mktemp)
trap 'rm -f "$log" "$dir/skein-append-dd.$$"' EXIT

# MB/s (10^6 bytes) of one dd run.
dd_mbs() {
    dd if=/dev/zero of="$dir/skein-append-dd.$$" bs=1M count=1024 oflag=direct conv=fsync 2>&1 |
        awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") printf "%.0f\n", $1 / $(i - 1) / 1e6 }'
    rm -f "$dir/skein-append-dd.$$"
}

# "name MB/s" for each benchmark in criterion's output: the middle of its thrpt triple.
bench_mbs() {
    awk '
        /^log\// { name = $1 }
        /thrpt:/ && name != "" {
            v = $4; u = $5
            f = (u ~ /^GiB/) ? 1073.741824 : (u ~ /^MiB/) ? 1.048576 : (u ~ /^KiB/) ? 0.001024 : 1e-6
            printf "%s %.0f\n", name, v * f
            name = ""
        }' "$1"
}

cargo bench -p skein-node --bench log --no-run >/dev/null 2>&1
echo "uptime: $(uptime)"
for r in $(seq 1 "$rounds"); do
    before=$(dd_mbs)
    SKEIN_BENCH_DIR=$dir cargo bench -p skein-node --bench log -- "$filter" >"$log" 2>&1
    after=$(dd_mbs)
    dd_mean=$(((before + after) / 2))
    echo "round $r: dd oflag=direct $before / $after MB/s (mean $dd_mean)"
    bench_mbs "$log" | while read -r name mbs; do
        awk -v n="$name" -v m="$mbs" -v d="$dd_mean" \
            'BEGIN { printf "  %-50s %6d MB/s  %3.0f%% of dd\n", n, m, 100 * m / d }'
    done
done
