package budget_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/karpx/karpx/autoscaler/aws/budget"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/catalog/awsquota"
	"github.com/karpx/karpx/ec2sim"
)

// TestClientBudgetWithinSimulatorBuckets: the client budget and the
// simulator read the same table (catalog/awsquota). For every operation of
// ec2api.API, every client-side bucket is the simulator's bucket for the
// same call shape scaled by Fraction, so at any Fraction in (0, 1] it never
// exceeds it.
func TestClientBudgetWithinSimulatorBuckets(t *testing.T) {
	api := reflect.TypeFor[ec2api.API]()
	for _, fraction := range []float64{1, budget.DefaultFraction, 0.1} {
		st := budget.New(budget.Options{Fraction: fraction, AdaptiveStart: 1}).Snapshot()
		seen := map[string]bool{}
		for _, as := range st.Actions {
			seen[as.Action] = true
			bare := as.Category == awsquota.UnfilteredNonMutating
			sim, ok := ec2sim.DefaultBucket(as.Action, bare)
			if !ok {
				t.Errorf("fraction %v: the client budgets %s (bare %v), which the simulator has no bucket for", fraction, as.Action, bare)
				continue
			}
			if as.Size > sim.Size || as.RefillPerSecond > sim.RefillPerSecond {
				t.Errorf("fraction %v: %s (bare %v) client bucket %v/%v per s exceeds the simulator's %v/%v per s",
					fraction, as.Action, bare, as.Size, as.RefillPerSecond, sim.Size, sim.RefillPerSecond)
			}
			if want := max(1, math.Floor(sim.Size*fraction)); as.Size != want || math.Abs(as.RefillPerSecond-sim.RefillPerSecond*fraction) > 1e-9 {
				t.Errorf("fraction %v: %s (bare %v) client bucket %v/%v per s, want %v/%v per s",
					fraction, as.Action, bare, as.Size, as.RefillPerSecond, want, sim.RefillPerSecond*fraction)
			}
		}
		for i := range api.NumMethod() {
			if name := api.Method(i).Name; !seen[name] {
				t.Errorf("fraction %v: no client-side bucket for ec2api.API.%s", fraction, name)
			}
		}
	}
}

// TestMiddlewareOnSDKClientStack installs a Limiter on a plain
// aws-sdk-go-v2 EC2 client talking to the simulator on loopback: the
// budget's attempt middleware sits right after the SDK's Retry, calls are
// keyed by operation name, operations outside ec2api.API pass through,
// and a refused Speculative call never reaches EC2 and surfaces as an
// *ExhaustedError inside the SDK's OperationError.
func TestMiddlewareOnSDKClientStack(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	l := budget.New(budget.Options{Fraction: 1, SpeculativeMaxWait: -1, AdaptiveStart: 1,
		Buckets: map[awsquota.Category]awsquota.Bucket{awsquota.NonMutating: {Size: 1, RefillPerSecond: 0.001}}})
	var finalize []string
	client := ec2.New(ec2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(e.Endpoint), HTTPClient: ec2apitest.LoopbackHTTP,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		APIOptions: []func(*middleware.Stack) error{l.AddToStack,
			func(s *middleware.Stack) error { finalize = s.Finalize.List(); return nil }},
	})
	ctx := context.Background()
	if _, err := client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(finalize, "Retry"); i < 0 || i+1 >= len(finalize) || finalize[i+1] != "karpx.budget.Attempts" {
		t.Errorf("Finalize step %v: want karpx.budget.Attempts right after Retry", finalize)
	}
	// RunInstances is not an operation of ec2api.API: no bucket, no count.
	_, _ = client.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-0"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceType: ec2types.InstanceTypeM5Large})
	st := l.Snapshot()
	if st.Totals.Requests != 1 || actionOf(t, st, "DescribeSubnets", awsquota.NonMutating).Requests != 1 {
		t.Errorf("after DescribeSubnets and RunInstances: totals %+v, want 1 request, on DescribeSubnets", st.Totals)
	}
	for _, as := range st.Actions {
		if as.Action == "RunInstances" {
			t.Errorf("RunInstances has a client-side bucket: %+v", as)
		}
	}

	speculative := budget.WithPriority(ctx, budget.Speculative)
	if _, err := client.DescribeImages(speculative, &ec2.DescribeImagesInput{}); err != nil {
		t.Fatal(err)
	}
	_, err := client.DescribeImages(speculative, &ec2.DescribeImagesInput{})
	var exhausted *budget.ExhaustedError
	var opErr *smithy.OperationError
	if !errors.As(err, &exhausted) || !errors.As(err, &opErr) || opErr.OperationName != "DescribeImages" {
		t.Fatalf("speculative call on an empty bucket: %v, want *budget.ExhaustedError in an OperationError of DescribeImages", err)
	}
	if n := e.Sim.Counts()["DescribeImages"]; n != 1 {
		t.Errorf("the simulator answered DescribeImages %d times, want 1 (the refused call must not be sent)", n)
	}
}

// TestIAMAndSQSAreNotBudgeted: ec2api.Config.APIOptions go on the EC2 and
// SSM clients only; SQS calls of the same ec2api.Client pass no bucket.
func TestIAMAndSQSAreNotBudgeted(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{})
	api := newLimited(t, e, budget.Options{})
	loopback := func(o *sqs.Options) { o.HTTPClient = ec2apitest.LoopbackHTTP }
	_, _ = api.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("karpx-interruptions")}, loopback)
	if _, err := api.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{}, ec2apitest.Loopback); err != nil {
		t.Fatal(err)
	}
	if e.Sim.Counts()["GetQueueUrl"] != 1 {
		t.Fatalf("simulator counts %v: the SQS call did not reach it", e.Sim.Counts())
	}
	if got := api.Snapshot().Totals.Requests; got != 1 {
		t.Errorf("budget counted %d requests, want 1 (the EC2 call only)", got)
	}
}
