#!/usr/bin/env bash
# Time to bug (issue 47): for each bug of the zoo, seeds and CPU-seconds to the first
# safety finding on the DEFAULT shape (no shape file, no dedicated nemesis), for the plain
# random sweep and for `--swarm`, over independent attempts with a cap per attempt.
#
#   bench/search.sh                                  # every bug, 5 attempts, 300 seeds / 120 CPU-s caps
#   BUGS="ack-before-isr elect-out-of-isr" ATTEMPTS=3 CAP_SEEDS=40 CAP_CPU=30s JOBS=1 bench/search.sh
#   SKEIN=target/debug/skein bench/search.sh         # a binary already built
#
# Each attempt K of a bug runs seeds START + K x CAP_SEEDS onwards, one after another, until a
# run fails a safety invariant that the correct core does not fail on the same seed, or the
# cap runs out. CPU-seconds are the attempt thread's own CPU clock (so a loaded machine does
# not inflate them); the correct-core check of a finding is not counted. Prints one Markdown
# table per mode (docs/search.md holds the measured ones, with the command).
set -euo pipefail
cd "$(dirname "$0")/.."
attempts=${ATTEMPTS:-5}
cap_seeds=${CAP_SEEDS:-300}
cap_cpu=${CAP_CPU:-120s}
jobs=${JOBS:-1}
start=${START:-0}
duration=${DURATION:-20s}
if [[ -z "${SKEIN:-}" ]]; then
    nice -n 10 cargo build -q -p skein-node
    SKEIN=target/debug/skein
fi
# BUG_NAMES, in order. The transaction bugs run on the txn workload's default shape (the
# plain workload has no transactions to break); the rest on the plain default.
bugs=${BUGS:-$(sed -n '/^pub const BUG_NAMES/,/^];/p' core/src/bugs.rs | grep -o '"[a-z0-9-]*"' | tr -d '"')}
txn_bugs=" late-txn-marker unverified-txn-partition no-lso txn-offsets-visible-early no-txn-fencing "
echo "uptime: $(uptime)"
echo "binary: $SKEIN ($(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
for mode in plain swarm; do
    extra=()
    [[ $mode == swarm ]] && extra=(--swarm)
    echo
    echo "## $mode"
    echo
    for workload in plain txn; do
        bug_flags=()
        for b in $bugs; do
            kind=plain
            [[ $txn_bugs == *" $b "* ]] && kind=txn
            [[ $kind == "$workload" ]] && bug_flags+=(--bug "$b")
        done
        [[ ${#bug_flags[@]} -eq 0 ]] && continue
        wl=()
        [[ $workload == txn ]] && wl=(--workload txn)
        # Exit 1 only says some attempt hit its cap: the table is the result.
        nice -n 10 "$SKEIN" sim zoo --time-to-bug --quiet --seeds "$start..$((start + 1))" \
            --windows "$attempts" --cap-seeds "$cap_seeds" --cap-cpu "$cap_cpu" --jobs "$jobs" \
            --duration "$duration" "${wl[@]}" "${bug_flags[@]}" "${extra[@]}" || true
        echo
    done
done
