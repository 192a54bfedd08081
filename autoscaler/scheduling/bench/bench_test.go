package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// row is one benchmark's figures for the table TestMain prints.
type row struct {
	name                    string
	pods, nodes             int
	podsPerSec, priceUSD    float64
	allocsPerOp, bytesPerOp int64
	peakHeapMiB             float64
	ref                     ReferenceResult
}

var (
	rowsMu sync.Mutex
	rows   = map[string]row{}
)

// TestMain runs the benchmarks and prints one table of their figures.
func TestMain(m *testing.M) {
	code := m.Run()
	if len(rows) > 0 {
		names := make([]string, 0, len(rows))
		for n := range rows {
			names = append(names, n)
		}
		sort.Strings(names)
		tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "benchmark\tpods\tpods/s\tnodes\t$/h\tallocs/op\tMiB/op\tpeak heap MiB\treference nodes\treference $/h\t$/h vs reference")
		for _, n := range names {
			r := rows[n]
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%.2f\t%d\t%.1f\t%.1f\t%d\t%.2f\t%.2f\n", r.name, r.pods, r.podsPerSec, r.nodes, r.priceUSD,
				r.allocsPerOp, float64(r.bytesPerOp)/(1<<20), r.peakHeapMiB, r.ref.Nodes, r.ref.PriceUSDPerHour, r.priceUSD/r.ref.PriceUSDPerHour)
		}
		tw.Flush()
	}
	os.Exit(code)
}

var (
	syntheticOnce sync.Once
	synthetic     []*cloudprovider.InstanceType
	realOnce      sync.Once
	real          []*cloudprovider.InstanceType
)

func syntheticTypes() []*cloudprovider.InstanceType {
	syntheticOnce.Do(func() { synthetic = SyntheticInstanceTypes(400) })
	return synthetic
}

func realTypes() []*cloudprovider.InstanceType {
	realOnce.Do(func() { real = CatalogInstanceTypes() })
	return real
}

func BenchmarkScheduling1000(b *testing.B)      { benchmarkScheduling(b, 1000, syntheticTypes()) }
func BenchmarkScheduling5000(b *testing.B)      { benchmarkScheduling(b, 5000, syntheticTypes()) }
func BenchmarkScheduling20000(b *testing.B)     { benchmarkScheduling(b, 20000, syntheticTypes()) }
func BenchmarkScheduling1000Real(b *testing.B)  { benchmarkScheduling(b, 1000, realTypes()) }
func BenchmarkScheduling5000Real(b *testing.B)  { benchmarkScheduling(b, 5000, realTypes()) }
func BenchmarkScheduling20000Real(b *testing.B) { benchmarkScheduling(b, 20000, realTypes()) }

// benchmarkScheduling solves n pods of the diverse mix against types and
// reports pods/s, NodeClaims planned, their total $/h and the peak heap
// one Solve reaches.
func benchmarkScheduling(b *testing.B, n int, types []*cloudprovider.InstanceType) {
	np := NodePool()
	np.InstanceTypes = types
	in := scheduling.Input{Pods: DiversePods(n, 42), NodePools: []scheduling.NodePoolInput{np}}
	var res scheduling.Result
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res = scheduling.Solve(in)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	if len(res.Unschedulable) != 0 {
		for _, err := range res.Unschedulable {
			b.Fatalf("%d of %d pods unschedulable, e.g.: %v", len(res.Unschedulable), n, err)
		}
	}
	r := row{
		name:        b.Name(),
		pods:        n,
		nodes:       len(res.NewNodeClaims),
		podsPerSec:  float64(n) * float64(b.N) / elapsed.Seconds(),
		priceUSD:    TotalPrice(res),
		allocsPerOp: int64(ms1.Mallocs-ms0.Mallocs) / int64(b.N),
		bytesPerOp:  int64(ms1.TotalAlloc-ms0.TotalAlloc) / int64(b.N),
		peakHeapMiB: peakHeapMiB(func() { scheduling.Solve(in) }),
		ref:         Reference(in.Pods, types),
	}
	b.ReportMetric(r.podsPerSec, "pods/s")
	b.ReportMetric(float64(r.nodes), "nodes")
	b.ReportMetric(r.priceUSD, "$/h")
	b.ReportMetric(r.peakHeapMiB, "peak-heap-MiB")
	rowsMu.Lock()
	rows[r.name] = r
	rowsMu.Unlock()
}

// peakHeapMiB runs f once and returns the most heap it held above the
// heap before it, sampled every 100µs from runtime/metrics.
func peakHeapMiB(f func()) float64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	return float64(peak-base) / (1 << 20)
}

// TestDiversePodsMix checks the mix: a fifth of each kind, deterministic
// for a seed.
func TestDiversePodsMix(t *testing.T) {
	a, b := DiversePods(1003, 42), DiversePods(1003, 42)
	kinds := map[string]int{}
	for i, p := range a {
		if p.Name != b[i].Name || p.Labels["my-label"] != b[i].Labels["my-label"] {
			t.Fatalf("pod %d differs between two calls with the same seed", i)
		}
		switch {
		case len(p.Spec.TopologySpreadConstraints) > 0:
			kinds[p.Spec.TopologySpreadConstraints[0].TopologyKey]++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil:
			kinds["affinity"]++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil:
			kinds["anti-affinity"]++
		default:
			kinds["generic"]++
		}
	}
	want := map[string]int{corev1.LabelTopologyZone: 200, corev1.LabelHostname: 200, "affinity": 200, "anti-affinity": 200, "generic": 203}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s pods: %d, want %d", k, kinds[k], n)
		}
	}
}
