#!/usr/bin/env bash
# bench-vs-karpenter: runs Karpenter v1.13.0's own scheduling benchmark
# (pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go,
# build tag test_performance) from a scratch module under _output/, then
# karpx's benchmark on the same pod mix and the same 400 synthetic instance
# types, on this machine in this run, and prints pods/s, nodes and the
# ratio. Karpenter's test binary takes several minutes to compile the first
# time (it is cached afterwards).
#
# SIZES: pod counts to compare (default "1000 5000").
# BENCHTIME: -benchtime for both (default 1x: one Solve, as Karpenter's
# takes seconds per op).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZES=${SIZES:-1000 5000}
BENCHTIME=${BENCHTIME:-1x}
KARPENTER_VERSION=v1.13.0
PKG=sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling
SCRATCH=$ROOT/_output/karpenter-bench
export GOTOOLCHAIN=local

mkdir -p "$SCRATCH"
if [[ ! -f $SCRATCH/go.mod ]]; then
	cat >"$SCRATCH/go.mod" <<MOD
module karpx.local/karpenterbench

go 1.26

require sigs.k8s.io/karpenter $KARPENTER_VERSION
MOD
	cp "$ROOT/go.sum" "$SCRATCH/go.sum"
	(cd "$SCRATCH" && GOFLAGS=-mod=mod go get -t "$PKG@$KARPENTER_VERSION")
fi
(cd "$SCRATCH" && go test -tags test_performance -c -o karpenter-scheduling.test "$PKG")

pattern=$(printf '%s|' $SIZES)
pattern="^BenchmarkScheduling(${pattern%|})\$"
echo "== Karpenter $KARPENTER_VERSION: $pattern (benchtime $BENCHTIME)"
(cd "$SCRATCH" && ./karpenter-scheduling.test -test.run '^$' -test.bench "$pattern" -test.benchtime "$BENCHTIME" -test.benchmem) | tee "$SCRATCH/karpenter.txt"
echo "== karpx: $pattern (benchtime $BENCHTIME)"
(cd "$ROOT" && go test -count=1 -run '^$' -bench "$pattern" -benchtime "$BENCHTIME" ./autoscaler/scheduling/bench) | tee "$SCRATCH/karpx.txt"

# metric NAME FILE BENCH: the value reported before unit NAME.
metric() {
	awk -v unit="$1" -v bench="$3" '$1 ~ "^"bench"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$2"
}
echo
printf '%-26s %14s %14s %8s %12s %12s\n' benchmark "karpenter pods/s" "karpx pods/s" ratio "karpenter nodes" "karpx nodes"
for n in $SIZES; do
	b=BenchmarkScheduling$n
	kp=$(metric pods/sec "$SCRATCH/karpenter.txt" "$b")
	kn=$(metric nodes "$SCRATCH/karpenter.txt" "$b")
	xp=$(metric pods/s "$SCRATCH/karpx.txt" "$b")
	xn=$(metric nodes "$SCRATCH/karpx.txt" "$b")
	ratio=$(awk -v a="$xp" -v b="$kp" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "n/a" }')
	printf '%-26s %14s %14s %8s %12s %12s\n' "$b" "$kp" "$xp" "$ratio" "$kn" "$xn"
done
