package lint

import (
	"strings"
	"syscall"
	"testing"
	"time"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// BenchmarkCheckUserData is the cost of CheckUserData, the webhook's
// validating path, on the AL2023 MIME document of the tests and on a
// 12 KiB script of 200 pipelines (echo … | tee -a), also under set -euo
// pipefail. Besides ns/op (wall
// time, which a loaded machine inflates with scheduling delays) it
// reports cpu-ns/op: the process's user and system CPU time per
// operation (getrusage(2), RUSAGE_SELF, so it includes the garbage
// collector's share), the figure that is least sensitive to load.
func BenchmarkCheckUserData(b *testing.B) {
	large := al2023MIME[:strings.LastIndex(al2023MIME, "--//--")] + strings.Repeat("echo 'padding line for a large but legal script' | tee -a /var/log/x\n", 200) + "--//--\n"
	pipefail := strings.Replace(large, "#!/bin/bash\n", "#!/bin/bash\nset -euo pipefail\n", 1)
	for _, c := range []struct{ name, text string }{{"al2023-mime", al2023MIME}, {"al2023-12KiB", large}, {"al2023-12KiB-pipefail", pipefail}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			cpu0 := processCPU(b)
			for b.Loop() {
				CheckUserData(apisv1.AMIFamilyAL2023, c.text)
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
