package lint

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkVFSAppends is the cost of n small writes (16 bytes each) to one
// virtual file of the sandbox, as a loop whose output goes to a file makes
// them, and reports whether the sandbox stopped the run (halted=1).
func BenchmarkVFSAppends(b *testing.B) {
	chunk := []byte("0123456789abcde\n")
	for _, n := range []int{300, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			halted := 0
			for b.Loop() {
				sb := &sandbox{ctx: context.Background(), files: map[string]vfile{}, executed: map[uint]bool{}, sources: []string{"x"}}
				w := newVFSWriter(&run{sb: sb}, "/var/log/out", 1, false)
				for range n {
					if _, err := w.Write(chunk); err != nil {
						halted = 1
						break
					}
				}
				_ = w.Close()
			}
			b.ReportMetric(float64(halted), "halted")
		})
	}
}
