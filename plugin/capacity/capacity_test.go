package capacity

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin/cluster"
)

func TestCapacityTable(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/capacity" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"learning":true,"entries":[`+
			`{"instanceType":"m5.large","amiID":"ami-1","estimate":{"cpu":"1930m","memory":"6903Mi","pods":"29","ephemeral-storage":"17Gi"},"observed":{"allocatable":{"cpu":"1930m","memory":"5879Mi","pods":"29","ephemeral-storage":"16Gi"},"at":%q,"node":"ip-10-0-0-1"}},`+
			`{"instanceType":"m5.xlarge","amiID":"ami-1","estimate":{"cpu":"3920m","memory":"14162Mi","pods":"58"}}]}`, at.Format(time.RFC3339))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{nil, []string{"m5.large", "ami-1", "6903Mi→5879Mi", "2m", "ip-10-0-0-1"}, []string{"m5.xlarge"}},
		{[]string{"--all"}, []string{"m5.large", "m5.xlarge", "14162Mi", "<none>"}, []string{"EPHEMERAL-STORAGE"}},
		{[]string{"-o", "wide"}, []string{"EPHEMERAL-STORAGE", "17Gi→16Gi"}, []string{"m5.xlarge"}},
		{[]string{"-o", "yaml", "--all"}, []string{"apiVersion: karpx.io/v1alpha1", "kind: CapacityReport", "instanceType: m5.xlarge", "node: ip-10-0-0-1"}, nil},
	} {
		streams, _, out, errOut := genericiooptions.NewTestIOStreams()
		cmd := NewCmd(&cluster.StaticFactory{}, streams)
		cmd.SetArgs(append([]string{"--endpoint", srv.URL}, tc.args...))
		cmd.SetOut(out)
		cmd.SetErr(errOut)
		nowFn = func() time.Time { return at.Add(2 * time.Minute) } // ages from a fixed clock
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v (%s)", tc.args, err, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("%v: output has %q:\n%s", tc.args, n, out)
			}
		}
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(&cluster.StaticFactory{}, streams)
	cmd.SetArgs([]string{"--endpoint", srv.URL, "-o", "name"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `unable to match a printer suitable for the output format "name"`) {
		t.Errorf("-o name: %v, want kubectl's unsupported-format error", err)
	}
}
