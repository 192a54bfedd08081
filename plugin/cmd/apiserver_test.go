package cmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// fakeAPIServer serves the discovery documents and the karpenter.sh/v1
// collections that `kubectl karpx status` reads. With karpenter false the
// karpenter.sh group is not served, as when the CRDs are not installed.
// collections maps a request path to the status code and body to answer.
func fakeAPIServer(t *testing.T, karpenter bool, collections map[string]string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			code := http.StatusOK
			if strings.Contains(body, `"kind":"Status"`) {
				fmt.Sscanf(body[strings.Index(body, `"code":`)+len(`"code":`):], "%d", &code)
			}
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		})
	}
	reply("/version", `{"major":"1","minor":"35","gitVersion":"v1.35.4"}`)
	reply("/api", `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`)
	reply("/api/v1", `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"nodes","singularName":"node","namespaced":false,"kind":"Node","verbs":["get","list"]}]}`)
	groups := `[]`
	if karpenter {
		groups = `[{"name":"karpenter.sh","versions":[{"groupVersion":"karpenter.sh/v1","version":"v1"}],"preferredVersion":{"groupVersion":"karpenter.sh/v1","version":"v1"}}]`
		reply("/apis/karpenter.sh/v1", `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"karpenter.sh/v1","resources":[`+
			`{"name":"nodepools","singularName":"nodepool","namespaced":false,"kind":"NodePool","verbs":["get","list","watch"]},`+
			`{"name":"nodeclaims","singularName":"nodeclaim","namespaced":false,"kind":"NodeClaim","verbs":["get","list","watch"]}]}`)
	}
	reply("/apis", `{"kind":"APIGroupList","apiVersion":"v1","groups":`+groups+`}`)
	for path, body := range collections {
		reply(path, body)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// executeAgainst runs `kubectl karpx args...` with the real flag-driven
// factory against srv.
func executeAgainst(t *testing.T, srv *httptest.Server, args ...string) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdKarpx(streams)
	root.SetArgs(append(args, "--server", srv.URL, "--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestStatusAPIServerCRDsMissing(t *testing.T) {
	srv := fakeAPIServer(t, false, nil)
	_, errOut, err := executeAgainst(t, srv, "status")
	want := `the server doesn't have a resource type "nodepools" (karpenter.sh/v1): install Karpenter's or karpx's CRDs (manifests/crds)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if errOut != "error: "+want+"\n" {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestStatusAPIServerForbidden(t *testing.T) {
	msg := `nodepools.karpenter.sh is forbidden: User \"dev\" cannot list resource \"nodepools\" in API group \"karpenter.sh\" at the cluster scope`
	srv := fakeAPIServer(t, true, map[string]string{
		"/apis/karpenter.sh/v1/nodepools": `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg +
			`","reason":"Forbidden","details":{"group":"karpenter.sh","kind":"nodepools"},"code":403}`,
	})
	_, errOut, err := executeAgainst(t, srv, "status")
	want := strings.ReplaceAll(msg, `\"`, `"`)
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if errOut != "error: "+want+"\n" {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestStatusAPIServer(t *testing.T) {
	srv := fakeAPIServer(t, true, map[string]string{
		"/apis/karpenter.sh/v1/nodepools": `{"kind":"NodePoolList","apiVersion":"karpenter.sh/v1","metadata":{},"items":[` +
			`{"metadata":{"name":"default"},"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[]}},"limits":{"cpu":"100"}}}]}`,
		"/apis/karpenter.sh/v1/nodeclaims": `{"kind":"NodeClaimList","apiVersion":"karpenter.sh/v1","metadata":{},"items":[` +
			`{"metadata":{"name":"default-abcde","labels":{"karpenter.sh/nodepool":"default"}},"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[]},` +
			`"status":{"capacity":{"cpu":"4","memory":"16Gi"},"conditions":[{"type":"Launched","status":"True","reason":"Launched","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}]}`,
	})
	out, errOut, err := executeAgainst(t, srv, "status")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, s := range []string{"default   default     1       4/100   16Gi/-", "default-abcde   default", "Launched"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}

	out, _, err = executeAgainst(t, srv, "version")
	if err != nil || !strings.Contains(out, "Server Version: v1.35.4") {
		t.Errorf("version = %q, %v", out, err)
	}
}
