package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
)

// serveReview posts body to an objectHandler for EC2NodeClasses and
// returns the decoded answer.
func serveReview(t *testing.T, contentType, body string) (admissionv1.AdmissionReview, int) {
	t.Helper()
	h := &objectHandler[ec2NodeClassUserData]{name: "test", admit: (&Validator{}).admitEC2NodeClass}
	req := httptest.NewRequest(http.MethodPost, ValidateEC2NodeClassPath, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %s", err, rec.Body.String())
	}
	if out.Response == nil {
		t.Fatalf("answer has no response: %s", rec.Body.String())
	}
	return out, rec.Code
}

func reviewJSON(apiVersion, uid, op, object string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"` + uid + `",` +
		`"kind":{"group":"karpenter.k8s.aws","version":"v1","kind":"EC2NodeClass"},"name":"nc","operation":"` + op + `","object":` + object + `}}`
}

func TestObjectHandlerAnswersInTheRequestsVersion(t *testing.T) {
	bad := string(ec2NodeClassJSON("#!/bin/bash\nsystemctl restart kubelet\n"))
	good := string(ec2NodeClassJSON("#!/bin/bash\necho hello\n"))
	for _, c := range []struct {
		apiVersion, object string
		allowed            bool
	}{
		{"admission.k8s.io/v1", good, true},
		{"admission.k8s.io/v1", bad, false},
		{"admission.k8s.io/v1beta1", bad, false},
	} {
		out, code := serveReview(t, "application/json", reviewJSON(c.apiVersion, "uid-1", "CREATE", c.object))
		if code != http.StatusOK || out.APIVersion != c.apiVersion || out.Kind != "AdmissionReview" {
			t.Errorf("%s: HTTP %d, answered %s %s", c.apiVersion, code, out.APIVersion, out.Kind)
		}
		if out.Response.UID != "uid-1" || out.Response.Allowed != c.allowed {
			t.Errorf("%s: uid %q allowed %v, want uid-1 %v", c.apiVersion, out.Response.UID, out.Response.Allowed, c.allowed)
		}
		if !c.allowed && !strings.Contains(out.Response.Result.Message, "KX003") {
			t.Errorf("denial does not name the rule: %q", out.Response.Result.Message)
		}
	}
}

func TestObjectHandlerRejectsBadRequests(t *testing.T) {
	good := string(ec2NodeClassJSON("#!/bin/bash\necho hello\n"))
	for _, c := range []struct {
		name, contentType, body string
		code                    int32
		message                 string
	}{
		{"empty body", "application/json", "", http.StatusBadRequest, "empty"},
		{"content type", "text/plain", reviewJSON("admission.k8s.io/v1", "u", "CREATE", good), http.StatusBadRequest, "application/json"},
		{"not JSON", "application/json", "{", http.StatusBadRequest, "decoding the AdmissionReview"},
		{"object of another shape", "application/json", reviewJSON("admission.k8s.io/v1", "u", "CREATE", `{"spec":{"userData":7}}`), http.StatusBadRequest, "decoding the AdmissionReview"},
		{"no request", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest, "no request"},
		{"too large", "application/json", reviewJSON("admission.k8s.io/v1", "u", "CREATE", `{"metadata":{"name":"`+strings.Repeat("x", MaxReviewBytes)+`"}}`), http.StatusRequestEntityTooLarge, "over"},
	} {
		out, code := serveReview(t, c.contentType, c.body)
		if code != http.StatusOK {
			t.Errorf("%s: HTTP %d; errors travel in the AdmissionReview, as the API server expects", c.name, code)
		}
		if out.Response.Allowed || out.Response.Result == nil || out.Response.Result.Code != c.code || !strings.Contains(out.Response.Result.Message, c.message) {
			t.Errorf("%s: got %+v, want code %d with %q", c.name, out.Response.Result, c.code, c.message)
		}
	}
}

func TestObjectHandlerRatchetsOnUpdate(t *testing.T) {
	bad := string(ec2NodeClassJSON("#!/bin/bash\nreboot\n"))
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"kind":{"group":"karpenter.k8s.aws","version":"v1","kind":"EC2NodeClass"},"name":"nc","operation":"UPDATE","object":` + bad + `,"oldObject":` + bad + `}}`
	out, _ := serveReview(t, "application/json", body)
	if !out.Response.Allowed || len(out.Response.Warnings) == 0 {
		t.Fatalf("an update that keeps an existing problem must be admitted with a warning: %+v", out.Response)
	}
}

// The decoded subset must see what a full EC2NodeClass decode sees: the
// handler's warnings are those of the rules run on the whole object.
func TestObjectHandlerMatchesFullDecode(t *testing.T) {
	obj := ec2NodeClassJSON("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: x\n")
	out, _ := serveReview(t, "application/json", reviewJSON("admission.k8s.io/v1", "u", "CREATE", string(obj)))
	full, err := decode[apisv1.EC2NodeClass](obj)
	if err != nil {
		t.Fatal(err)
	}
	var direct []string
	for _, f := range kxlint.CheckEC2NodeClass(full).Warnings() {
		direct = append(direct, f.Warning())
	}
	if strings.Join(direct, "|") != strings.Join(out.Response.Warnings, "|") || len(direct) == 0 {
		t.Fatalf("objectHandler warnings %q, full EC2NodeClass %q", out.Response.Warnings, direct)
	}
}

// FuzzObjectHandler feeds arbitrary bodies to the validating handler: it
// must never panic and must always answer with an AdmissionReview whose
// response either decided the request (carrying its UID back) or names a
// client error. Under plain `go test` only the seeds run; fuzz with
// `go test ./webhook -run '^$' -fuzz FuzzObjectHandler -fuzztime 60s`.
func FuzzObjectHandler(f *testing.F) {
	good := string(ec2NodeClassJSON("#!/bin/bash\necho hello\n"))
	bad := string(ec2NodeClassJSON("#!/bin/bash\nsystemctl restart kubelet\n"))
	for _, seed := range []string{
		reviewJSON("admission.k8s.io/v1", "u", "CREATE", good),
		reviewJSON("admission.k8s.io/v1beta1", "u", "UPDATE", bad),
		reviewJSON("admission.k8s.io/v1", "u", "DELETE", "null"),
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"UPDATE","object":` + bad + `,"oldObject":{"spec":[]}}}`,
		`{"request":{"object":{"spec":{"amiSelectorTerms":[{"alias":"bottlerocket@latest"}],"userData":"[settings"}}}}`,
		`{"request":null}`, `[]`, `"x"`, `{`,
	} {
		f.Add(seed)
	}
	h := &objectHandler[ec2NodeClassUserData]{name: "fuzz", admit: (&Validator{}).admitEC2NodeClass}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, ValidateEC2NodeClassPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is not an AdmissionReview (%v): %s", err, rec.Body.String())
		}
		if r := out.Response.Result; r != nil && !out.Response.Allowed && r.Code != http.StatusBadRequest &&
			r.Code != http.StatusRequestEntityTooLarge && r.Code != http.StatusForbidden {
			t.Fatalf("unexpected result code %d: %s", r.Code, r.Message)
		}
	})
}
