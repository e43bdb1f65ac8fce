#!/usr/bin/env bash
# A profile-guided build of `skein` (docs/PERFORMANCE.md, "Simulator"): builds an
# instrumented binary, trains it on simulations (the fault-free bench workload, the same
# with the default fault mix, and seeded fault runs), merges the profiles and builds
# again with them. The result is an ordinary `skein` (same source, same release profile,
# same trace hashes: the compiler only lays out and inlines differently), copied to
# target/pgo/skein. Compare it with the plain build in one sitting:
#
#   bench/pgo.sh
#   bench/sim-ab.sh 6 target/release/skein target/pgo/skein
#
# Needs LLVM's llvm-profdata of the compiler's own LLVM version: taken from rustup's
# llvm-tools component (installed here if missing), not from the system's LLVM, whose
# profile format may be older. Two release builds with fat LTO: ~10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

data=target/pgo-data
gen_dir=target/pgo-gen
use_dir=target/pgo-use

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  command -v rustup >/dev/null || { echo "no $profdata and no rustup to install llvm-tools" >&2; exit 1; }
  rustup component add llvm-tools-preview
fi
[ -x "$profdata" ] || { echo "llvm-tools installed, but $profdata is missing" >&2; exit 1; }

echo "== 1/4 instrumented build ($gen_dir)"
rm -rf "$data"
mkdir -p "$data"
RUSTFLAGS="-Cprofile-generate=$PWD/$data" \
  cargo build --release -p skein-node --target-dir "$gen_dir"

echo "== 2/4 training runs"
gen="$gen_dir/release/skein"
# What users run: the bench's kind of workload, fault runs and their checks; output is not
# needed. Not the bench's own runs (produce rate 1,000/s): a build trained on exactly the
# runs it is then measured on would flatter itself.
"$gen" sim bench --seeds 2 --duration 20s --produce-rate 700 >/dev/null
"$gen" sim bench --seeds 1 --duration 10s --produce-rate 1500 >/dev/null
"$gen" sim bench --seeds 1 --duration 20s --produce-rate 800 --fault-rate 1 >/dev/null
for seed in 1 2 3 4; do
  "$gen" sim run --seed "$seed" >/dev/null || true # a verdict, not a build failure
done

echo "== 3/4 merging profiles"
"$profdata" merge -o "$data/merged.profdata" "$data"/*.profraw
# Named by content: cargo rebuilds when RUSTFLAGS change, not when a file they name does.
sum=$(sha256sum "$data/merged.profdata" | cut -c1-16)
mv "$data/merged.profdata" "$data/merged-$sum.profdata"

echo "== 4/4 optimised build ($use_dir)"
RUSTFLAGS="-Cprofile-use=$PWD/$data/merged-$sum.profdata" \
  cargo build --release -p skein-node --target-dir "$use_dir"
mkdir -p target/pgo
cp "$use_dir/release/skein" target/pgo/skein
echo "built target/pgo/skein"
