package ec2sim

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

var (
	fuzzSimOnce sync.Once
	fuzzSim     *Simulator
)

// fuzzHandler is one simulator, without throttling or response delay,
// shared by the fuzz targets' iterations.
func fuzzHandler(t *testing.T) http.Handler {
	fuzzSimOnce.Do(func() {
		s, err := New(Config{ResponseDelay: -1, Throttle: ThrottleConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		fuzzSim = s
	})
	return fuzzSim.Handler()
}

// FuzzQuery sends arbitrary EC2 Query bodies: the simulator must never
// panic or answer 500 (an internal error is a simulator bug, not the
// client's), must answer every error in EC2's XML shape, and must refuse
// any body that repeats a parameter or carries a malformed list index.
// Seeds: testdata/fuzz/FuzzQuery and the f.Add calls below.
func FuzzQuery(f *testing.F) {
	const v = "&Version=2016-11-15"
	for _, seed := range []string{
		"Action=DescribeInstances" + v,
		"Action=DescribeInstances" + v + "&InstanceId.1=i-0123456789abcdef0&InstanceId.2=i-0123456789abcdef1",
		"Action=DescribeInstances" + v + "&Filter.1.Name=tag%3Akarpenter.sh%2Fnodepool&Filter.1.Value.1=default&MaxResults=5",
		"Action=DescribeSubnets" + v + "&Filter.1.Name=tag%3Akarpenter.sh%2Fdiscovery&Filter.1.Value.1=karpx",
		"Action=TerminateInstances" + v + "&InstanceId.1=i-0123456789abcdef0",
		"Action=CreateTags" + v + "&ResourceId.1=i-0123456789abcdef0&Tag.1.Key=a&Tag.1.Value=b",
		"Action=CreateFleet" + v + "&Type=instant&TargetCapacitySpecification.TotalTargetCapacity=1&TargetCapacitySpecification.DefaultTargetCapacityType=on-demand&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=x&LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large",
		"Action=DescribeInstanceTypes" + v + "&InstanceType.1=m5.large",
		"Action=DescribeImages" + v + "&Owner.1=amazon&Filter.1.Name=name&Filter.1.Value.1=amazon-eks-node-*",
		"Action=DescribeInstances" + v + "&InstanceId.-1=i-0123456789abcdef0",
		"Action=DescribeInstances&Action=TerminateInstances" + v,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h := fuzzHandler(t)
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.String()
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %.500s", rec.Code, body, out)
		}
		if rec.Code != http.StatusOK && !strings.Contains(out, "<Code>") {
			t.Fatalf("status %d without an EC2 error document for %q: %.500s", rec.Code, body, out)
		}
		form, err := url.ParseQuery(body)
		if err != nil || rec.Code != http.StatusOK {
			return
		}
		for k, vs := range form {
			if len(vs) > 1 {
				t.Fatalf("repeated parameter %q accepted: %q", k, body)
			}
			if !wellFormedKey(k) {
				t.Fatalf("malformed key %q accepted: %q", k, body)
			}
		}
	})
}

// FuzzSSMGetParameter sends arbitrary JSON to SSM GetParameter: never a
// panic or a 500, always an AWS JSON error document or a parameter.
func FuzzSSMGetParameter(f *testing.F) {
	for _, seed := range []string{
		`{"Name":"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id"}`,
		`{"Name":"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/arm64/latest/image_id"}`,
		`{"Name":"/aws/service/eks/optimized-ami/99999999999999999999.1/amazon-linux-2023/x86_64/standard/recommended/image_id"}`,
		`{"Name":"/aws/service/eks/optimized-ami/1.35/amazon-linux-2/recommended/image_id:2"}`,
		`{"Name":""}`, `{}`, `[]`, `null`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h := fuzzHandler(t)
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.String()
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %.500s", rec.Code, body, out)
		}
		if rec.Code != http.StatusOK && (!strings.Contains(out, `"__type"`) || rec.Header().Get("X-Amzn-ErrorType") == "") {
			t.Fatalf("status %d without an AWS JSON error for %q: %.500s", rec.Code, body, out)
		}
		if rec.Code == http.StatusOK && !strings.Contains(out, `"Parameter"`) {
			t.Fatalf("200 without a parameter for %q: %.500s", body, out)
		}
	})
}
