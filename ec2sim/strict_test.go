package ec2sim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// post sends body to h as an EC2 Query request and returns the status and
// the answer.
func post(h http.Handler, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestStrictQuery: the simulator refuses what EC2 refuses instead of
// guessing: a repeated Action, an unknown Version, malformed list indexes
// (which it used to drop, so DescribeInstances answered every instance), an
// over-size or unparsable body.
func TestStrictQuery(t *testing.T) {
	sim, err := New(Config{ResponseDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := sim.Handler()
	const v = "&Version=2016-11-15"
	for _, tc := range []struct {
		name, body, code string
		status           int
	}{
		{"well formed", "Action=DescribeInstances" + v + "&InstanceId.1=i-0123456789abcdef0", "InvalidInstanceID.NotFound", 400},
		{"Action twice", "Action=DescribeInstances&Action=TerminateInstances" + v, "InvalidQueryParameter", 400},
		{"Version twice", "Action=DescribeInstances" + v + v, "InvalidQueryParameter", 400},
		{"unknown Version", "Action=DescribeInstances&Version=2099-01-01", "NoSuchVersion", 400},
		{"older Version", "Action=DescribeInstances&Version=2014-10-01", "NoSuchVersion", 400},
		{"negative index", "Action=DescribeInstances" + v + "&InstanceId.-1=i-0123456789abcdef0", "UnknownParameter", 400},
		{"index 0", "Action=DescribeInstances" + v + "&InstanceId.0=i-0123456789abcdef0", "UnknownParameter", 400},
		{"zero-padded index", "Action=DescribeInstances" + v + "&InstanceId.01=i-0123456789abcdef0", "UnknownParameter", 400},
		{"signed index", "Action=DescribeInstances" + v + "&InstanceId.%2B1=i-0123456789abcdef0", "UnknownParameter", 400},
		{"huge Filter index", "Action=DescribeInstances" + v + "&Filter.99999999999999999999.Name=tag-key&Filter.99999999999999999999.Value.1=x", "UnknownParameter", 400},
		{"Filter index above 1000", "Action=DescribeInstances" + v + "&Filter.1001.Name=tag-key&Filter.1001.Value.1=x", "UnknownParameter", 400},
		{"empty segment", "Action=DescribeInstances" + v + "&Filter..Name=tag-key", "UnknownParameter", 400},
		{"bad escape", "Action=DescribeInstances" + v + "&InstanceId.1=%zz", "MalformedQueryString", 404},
		{"over-size body", "Action=DescribeInstances" + v + "&Junk=" + strings.Repeat("a", maxBody), "MalformedQueryString", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(h, tc.body)
			if status != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
				t.Errorf("status %d, body %.300s; want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
	// Filters at index 1000 are well formed (and filter nothing here).
	if status, body := post(h, "Action=DescribeInstances"+v+"&Filter.1000.Name=tag-key&Filter.1000.Value.1=x"); status != 200 {
		t.Errorf("index 1000: %d %.300s", status, body)
	}
}

// TestSSMRefusesUnpublishedVersions: SSM has no EKS AMI parameters for
// Kubernetes versions that cannot exist, and validates the name's length.
func TestSSMRefusesUnpublishedVersions(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	for _, name := range []string{
		"/aws/service/eks/optimized-ami/99999999999999999999.1/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.035/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/2.0/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/bottlerocket/aws-k8s-99999999999999999999.1/x86_64/latest/image_id",
	} {
		_, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		apiErr(t, err, "ParameterNotFound", 400)
	}
	_, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/" + strings.Repeat("a", maxParameterName))})
	apiErr(t, err, "ValidationException", 400)
	if _, err := env.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.34-nvidia/x86_64/latest/image_id")}); err != nil {
		t.Errorf("a published version: %v", err)
	}
}
