package ec2sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// testEnv is a simulator served by httptest with real SDK clients.
type testEnv struct {
	sim      *Simulator
	endpoint string
	ec2      *ec2.Client
	ssm      *ssm.Client
}

func newTestEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	sim, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	env := &testEnv{sim: sim, endpoint: srv.URL}
	env.ec2 = env.ec2Client(1)
	env.ssm = ssm.NewFromConfig(awsConfig(), func(o *ssm.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = newRetryer(1)
	})
	return env
}

func awsConfig() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}
}

// newRetryer is the SDK's standard retryer (retry quota included) with
// maxAttempts and a 2ms backoff so tests do not sleep for seconds.
func newRetryer(maxAttempts int) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 2 * time.Millisecond, nil })
	})
}

// ec2Client returns an EC2 client with maxAttempts attempts per call.
func (e *testEnv) ec2Client(maxAttempts int, opts ...func(*ec2.Options)) *ec2.Client {
	return ec2.NewFromConfig(awsConfig(), append([]func(*ec2.Options){func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.Retryer = newRetryer(maxAttempts)
	}}, opts...)...)
}

// rewriteBody edits the serialized EC2 Query form before it is signed, to
// send requests the SDK's own validation would refuse.
func rewriteBody(edit func(url.Values)) func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Build.Add(middleware.BuildMiddlewareFunc("rewriteBodyBuild",
				func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
					req := in.Request.(*smithyhttp.Request)
					raw, err := io.ReadAll(req.GetStream())
					if err != nil {
						return middleware.BuildOutput{}, middleware.Metadata{}, err
					}
					v, err := url.ParseQuery(string(raw))
					if err != nil {
						return middleware.BuildOutput{}, middleware.Metadata{}, err
					}
					edit(v)
					body := []byte(v.Encode())
					if req, err = req.SetStream(bytes.NewReader(body)); err != nil {
						return middleware.BuildOutput{}, middleware.Metadata{}, err
					}
					req.ContentLength = int64(len(body))
					in.Request = req
					return next.HandleBuild(ctx, in)
				}), middleware.Before)
		})
	}
}

// apiErr asserts err is a smithy.APIError with code and HTTP status.
func apiErr(t *testing.T, err error, code string, status int) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want smithy.APIError %s, got %T: %v", code, err, err)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("want code %s, got %s (%s)", code, ae.ErrorCode(), ae.ErrorMessage())
	}
	var re *awshttp.ResponseError
	if status != 0 {
		if !errors.As(err, &re) {
			t.Fatalf("no HTTP response in error %v", err)
		}
		if re.HTTPStatusCode() != status {
			t.Fatalf("%s: want HTTP %d, got %d", code, status, re.HTTPStatusCode())
		}
	}
}

// httpJSON does an admin request and returns status and body.
func httpDo(t *testing.T, method, u string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
