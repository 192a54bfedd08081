// Package bench is karpx's scheduling benchmark suite (make bench): the
// pod mix of Karpenter's scheduling benchmark (sigs.k8s.io/karpenter
// v1.13.0 pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go:
// generic pods, zone and hostname topology spread, zone pod affinity,
// hostname pod anti-affinity, random cpu and memory requests) at 1,000,
// 5,000 and 20,000 pods, solved against 400 synthetic instance types shaped
// like Karpenter's fake ones (SyntheticInstanceTypes) and against the 1,363
// types of the real EC2 catalogue (CatalogInstanceTypes). The benchmarks
// (bench_test.go) report pods/s, NodeClaims planned, their total $/h,
// allocations and peak heap, and print one table at the end; Reference
// prices the same pods packed first-fit decreasing onto the cheapest
// single instance type, as a yardstick for packing quality.
// BenchmarkSchedulingInPasses (passes_test.go) solves the head-to-head's
// 2,000-pod burst, in creation order, in passes of 2,000 down to 100 pods
// on the NodeClaims earlier passes planned, and reports the nodes and $/h
// each pass size ends with.
package bench
