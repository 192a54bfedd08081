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
if [[ ! -f $SCRATCH/.ready ]]; then
	cat >"$SCRATCH/go.mod" <<MOD
module karpx.local/karpenterbench

go 1.26

require (
	github.com/karpx/karpx v0.0.0
	sigs.k8s.io/karpenter $KARPENTER_VERSION
)

replace github.com/karpx/karpx => ../..
MOD
	cp "$ROOT/go.sum" "$SCRATCH/go.sum"
	cp "$ROOT/hack/bench-vs-karpenter/same_pods_test.go.tmpl" "$SCRATCH/same_pods_test.go"
	(cd "$SCRATCH" && GOFLAGS=-mod=mod go get -t "$PKG@$KARPENTER_VERSION" && GOFLAGS=-mod=mod go mod tidy)
	touch "$SCRATCH/.ready"
fi
cp "$ROOT/hack/bench-vs-karpenter/same_pods_test.go.tmpl" "$SCRATCH/same_pods_test.go"
(cd "$SCRATCH" && go test -tags test_performance -c -o karpenter-scheduling.test "$PKG" && go test -c -o karpenter-same-pods.test .)

pattern=$(printf '%s|' $SIZES)
pattern="^BenchmarkScheduling(${pattern%|})\$"
echo "== Karpenter $KARPENTER_VERSION: $pattern (benchtime $BENCHTIME)"
(cd "$SCRATCH" && ./karpenter-scheduling.test -test.run '^$' -test.bench "$pattern" -test.benchtime "$BENCHTIME" -test.benchmem) | tee "$SCRATCH/karpenter.txt"
echo "== Karpenter $KARPENTER_VERSION on karpx's pods (bench.DiversePods), for nodes and \$/h"
(cd "$SCRATCH" && SIZES="$SIZES" ./karpenter-same-pods.test -test.run TestKarpenterSamePods) | tee "$SCRATCH/karpenter-same-pods.txt"
echo "== karpx: $pattern (benchtime $BENCHTIME)"
(cd "$ROOT" && go test -count=1 -run '^$' -bench "$pattern" -benchtime "$BENCHTIME" ./autoscaler/scheduling/bench) | tee "$SCRATCH/karpx.txt"

# metric NAME FILE BENCH: the value reported before unit NAME.
metric() {
	awk -v unit="$1" -v bench="$3" '$1 ~ "^"bench"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$2"
}
# same N FIELD: field FIELD (2 pods/s, 3 nodes, 4 $/h) of Karpenter's run on karpx's pods.
same() { awk -v n="$1" -v f="$2" '$1 == "KARPENTER_SAME_PODS" && $2 == n { print $(f+1) }' "$SCRATCH/karpenter-same-pods.txt"; }
echo
printf '%-24s %16s %12s %7s %15s %11s %15s %11s\n' benchmark "karpenter pods/s" "karpx pods/s" ratio "karpenter nodes" "karpx nodes" "karpenter \$/h" "karpx \$/h"
for n in $SIZES; do
	b=BenchmarkScheduling$n
	kp=$(metric pods/sec "$SCRATCH/karpenter.txt" "$b")
	xp=$(metric pods/s "$SCRATCH/karpx.txt" "$b")
	ratio=$(awk -v a="$xp" -v b="$kp" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "n/a" }')
	printf '%-24s %16s %12s %7s %15s %11s %15s %11s\n' "$b" "$kp" "$xp" "$ratio" "$(same "$n" 3)" "$(metric nodes "$SCRATCH/karpx.txt" "$b")" "$(same "$n" 4)" "$(metric '$/h' "$SCRATCH/karpx.txt" "$b")"
done
echo "(Karpenter's own benchmark: $(metric nodes "$SCRATCH/karpenter.txt" BenchmarkScheduling${SIZES%% *}) nodes at ${SIZES%% *} pods on its own random pods; nodes and \$/h above are both schedulers on the same pods.)"
