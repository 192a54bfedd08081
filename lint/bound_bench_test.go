package lint

import (
	"fmt"
	"runtime"
	"strings"
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
		// For the secret detector: 16 KB of key assignments (every line
		// kept by its prefilter, most matched by gitleaks' generic rule),
		// and a token in base64 within base64 (its decoding passes).
		{"secrets-16KB-assignments", "#!/bin/bash\n" + secretLines(16000)},
		{"secrets-16KB-base64-twice", "#!/bin/bash\necho " + b64s(b64s("export GITHUB_TOKEN=ghp_R2kq8vD1xY7mZ3pL5nB9cT4wQ6eH0jA2sF8u\n"+strings.Repeat("# padding line\n", 400))) + " > /tmp/x\n"},
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

// secretLines returns about n bytes of "api_key_N = <high-entropy value>"
// lines.
func secretLines(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "api_key_%d = Zq8R2vL5kX9mN3bT7wY4pH6cJ1dF%04d\n", i, i)
	}
	return b.String()
}
