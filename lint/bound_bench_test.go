package lint

import (
	"runtime"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// BenchmarkHostileUserData is the cost of issue 31's hostile userData in
// CheckUserData, the webhook's validating path: nested "((" at 50 KB,
// 200 KB and 2 MB (over EC2's 16 KB: KX001 alone, nothing parsed; before
// the bounds 0.2 s and 250 MB, 1.1 s and 930 MB, and a fatal stack
// overflow), at 16 KB (parsed until the nesting bound), and a gzip part
// that decompresses to a megabyte of nesting. Run with -benchmem; the
// bytes figure includes the goroutine stack only through B/op of what
// the stack growth copies, so the webhook process figures are in
// TestWebhookBinarySurvivesHostileUserData. Figures on 2 cores under a
// load average of 20: 0.5-0.9 µs for the three over 16 KB, 2.2 ms for
// 16 KB, 12 ms for the gzip part.
func BenchmarkHostileUserData(b *testing.B) {
	nested := func(n int) string { return "#!/bin/bash\n" + nest("((", "1", "))", n) + "\n" }
	gz := mimeDoc("B", "Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gzipText(b, nested(250000))))
	for _, c := range []struct{ name, text string }{
		{"nested-50KB", nested(12500)},
		{"nested-200KB", nested(50000)},
		{"nested-2MB", nested(500000)},
		{"nested-16KB", nested(4000)},
		{"gzip-1MB-nested", gz},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				if fs := CheckUserData(apisv1.AMIFamilyAL2023, c.text); !fs.Denied() {
					b.Fatalf("not denied: %v", fs)
				}
			}
		})
	}
}

// BenchmarkDepthCheck is the cost of one depthGuard check at a given call
// depth (runtime.Callers skipping maxShellParseFrames).
func BenchmarkDepthCheck(b *testing.B) {
	for _, depth := range []int{50, 500, 3000} {
		b.Run(itoa(depth), func(b *testing.B) {
			var pc [1]uintptr
			var rec func(int)
			rec = func(n int) {
				if n > 0 {
					rec(n - 1)
					return
				}
				for b.Loop() {
					runtime.Callers(maxShellParseFrames, pc[:])
				}
			}
			rec(depth)
		})
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s + "-frames"
}
