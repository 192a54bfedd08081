package webhook_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/karpx/karpx/webhook"
)

// TestWebhookBinarySurvivesHostileUserData sends the karpx-webhook process
// the EC2NodeClass reviews of issue 31 that crashed or stalled it (2 MB of
// nested "((" in userData was a fatal stack overflow; 200 KB took 51 s and
// 684 MB) and hostile inputs under EC2's 16 KB that decompress or expand
// past karpx's bounds. Each must be answered with the expected denial (or
// admission) within a generous time, the process must keep serving (a
// plain review after them is admitted), and its peak RSS must stay
// bounded; the figures are logged.
func TestWebhookBinarySurvivesHostileUserData(t *testing.T) {
	requireSuite(t)
	s := startWebhookProcess(t)
	nested := func(n int) string { return strings.Repeat("((", n) + "1" + strings.Repeat("))", n) }
	gzipPart := func(script string) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(script))
		_ = zw.Close()
		return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n" +
			base64.StdEncoding.EncodeToString(buf.Bytes()) + "\n--B--\n"
	}
	var bomb strings.Builder
	bomb.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\n#cloud-config\nx0: &l0 [\"echo hi\"]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&bomb, "x%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	bomb.WriteString("runcmd: *l9\n--B--\n")
	cases := []struct {
		name, family, userData string
		allowed                bool
		rule                   string
	}{
		{"2 MB of nested ((", "al2023", "#!/bin/bash\n" + nested(500000) + "\n", false, "KX001"},
		{"200 KB of nested ((", "al2023", "#!/bin/bash\n" + nested(50000) + "\n", false, "KX001"},
		{"50 KB of nested ((", "al2023", "#!/bin/bash\n" + nested(12500) + "\n", false, "KX001"},
		{"16 KB of nested ((", "al2023", "#!/bin/bash\n" + nested(4000) + "\n", false, "KX009"},
		{"1 MB of nested (( in a gzip part", "al2023", gzipPart("#!/bin/bash\n" + nested(250000) + "\n"), false, "KX009"},
		{"1 MB of comment lines in a gzip part", "al2023", gzipPart("#!/bin/bash\n" + strings.Repeat("#\n", 500000)), true, ""},
		{"cloud-config alias bomb", "al2023", bomb.String(), false, "KX009"},
		{"Bottlerocket inline tables nested 2,600 deep", "bottlerocket", "a = " + strings.Repeat("{b = ", 2600) + "1" + strings.Repeat("}", 2600) + "\n", false, "KX009"},
		// Scripts the interpreter sandbox refuses at one of its bounds.
		{"sandbox: busy loop", "al2023", "#!/bin/bash\nwhile :; do :; done\n", false, "KX009"},
		{"sandbox: fork bomb", "al2023", "#!/bin/bash\nf(){ f | f & }; f\n", false, "KX009"},
		{"sandbox: classic fork bomb", "al2023", "#!/bin/bash\n:(){ :|:& };:\n", false, "KX009"},
		{"sandbox: fork bomb in subshells", "al2023", "#!/bin/bash\nf(){ (f | f) & }; f\n", false, "KX009"},
		{"sandbox: fork bomb into a loop", "al2023", "#!/bin/bash\nf(){ f | while read l; do f; done; }; f\n", false, "KX009"},
		{"sandbox: fork bomb in bash -c", "al2023", "#!/bin/bash\nbash -c 'f(){ f | f & }; f'\n", false, "KX009"},
		{"sandbox: process substitution bomb", "al2023", "#!/bin/bash\nf(){ cat <(f) <(f); }; f\n", false, "KX009"},
		{"sandbox: output substitution bomb", "al2023", "#!/bin/bash\nf(){ echo x > >(f); f; }; f\n", false, "KX009"},
		{"sandbox: background bomb", "al2023", "#!/bin/bash\nf(){ f & f & }; f\n", false, "KX009"},
		{"sandbox: substitution bomb", "al2023", "#!/bin/bash\nf(){ echo $(f) $(f); }; f\n", false, "KX009"},
		{"sandbox: 4,000 unread process substitutions", "al2023", "#!/bin/bash\nfor i in {1..4000}; do : <(:); done\n", false, "KX009"},
		{"sandbox: doubling variable", "al2023", "#!/bin/bash\nx=aaaaaaaa\n" + strings.Repeat("x=$x$x\n", 60), false, "KX009"},
		{"sandbox: self-running file", "al2023", "#!/bin/bash\necho 'sh /tmp/a' > /tmp/a\nsh /tmp/a\n", false, "KX009"},
	}
	var rss0 int
	if v, err := strconv.Atoi(strings.TrimSuffix(s.peakRSS(t), " kB")); err == nil {
		rss0 = v
	}
	for _, tc := range cases {
		body := ec2NodeClassReview("hostile", tc.userData)
		body = bytes.ReplaceAll(body, []byte("al2023@latest"), []byte(tc.family+"@latest"))
		start := time.Now()
		review, err := postReview(s.client, s.url+webhook.ValidateEC2NodeClassPath, body)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v (the process may have died)", tc.name, err)
		}
		msg := ""
		if review.Response.Result != nil {
			msg = review.Response.Result.Message
		}
		t.Logf("%-45s %8d bytes of userData: answered in %v, allowed=%v, peak RSS so far %s", tc.name, len(tc.userData), took.Round(time.Millisecond), review.Response.Allowed, s.peakRSS(t))
		if review.Response.Allowed != tc.allowed || !strings.Contains(msg, tc.rule) {
			t.Errorf("%s: allowed=%v %q, want allowed=%v with %s", tc.name, review.Response.Allowed, msg, tc.allowed, tc.rule)
		}
		if took > 3*time.Second {
			t.Errorf("%s: answered in %v, want under 3 s", tc.name, took)
		}
	}
	// Control: the same process still serves an ordinary review.
	if err := s.post(webhook.ValidateEC2NodeClassPath, ec2NodeClassReview("ok", benchUserData), true); err != nil {
		t.Fatalf("ordinary review after the hostile ones: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", s.pid)); err != nil {
		t.Fatalf("karpx-webhook process gone: %v", err)
	}
	peak, err := strconv.Atoi(strings.TrimSuffix(s.peakRSS(t), " kB"))
	if err != nil {
		t.Fatalf("peak RSS: %v", err)
	}
	t.Logf("karpx-webhook peak RSS: %d MB at start, %d MB after the hostile reviews", rss0/1024, peak/1024)
	// 78 MB measured with every case above (52 MB at start); the target
	// is 100 MB, the bound generous.
	if peak > 150<<10 {
		t.Errorf("peak RSS %d MB, want under 150 MB", peak/1024)
	}
}

// postReview posts an AdmissionReview and decodes the answer.
func postReview(c *http.Client, url string, body []byte) (*admissionv1.AdmissionReview, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return nil, fmt.Errorf("status %d, not an AdmissionReview: %v: %.200s", resp.StatusCode, err, out)
	}
	return &review, nil
}
