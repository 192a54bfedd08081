package lint

import (
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

func BenchmarkCheckUserData(b *testing.B) {
	large := al2023MIME[:strings.LastIndex(al2023MIME, "--//--")] + strings.Repeat("echo 'padding line for a large but legal script' | tee -a /var/log/x\n", 200) + "--//--\n"
	for _, c := range []struct{ name, text string }{{"al2023-mime", al2023MIME}, {"al2023-12KiB", large}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for i := 0; i < b.N; i++ {
				CheckUserData(apisv1.AMIFamilyAL2023, c.text)
			}
		})
	}
}
