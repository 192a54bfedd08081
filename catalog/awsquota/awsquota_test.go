package awsquota_test

import (
	"testing"

	"github.com/karpx/karpx/catalog/awsquota"
)

// TestEveryChargeHasABucket: every action the table lists is charged to a
// category with a default bucket of at least one request and a positive
// refill rate, except the IAM, EKS and Pricing actions, which have none.
func TestEveryChargeHasABucket(t *testing.T) {
	buckets := awsquota.Buckets()
	if len(awsquota.Actions()) < 20 {
		t.Fatalf("Actions() = %v: table truncated?", awsquota.Actions())
	}
	for _, action := range awsquota.Actions() {
		ch, ok := awsquota.ChargeOf(action)
		if !ok {
			t.Fatalf("ChargeOf(%s) not ok although Actions lists it", action)
		}
		b, ok := buckets[ch.Category]
		if awsquota.Unthrottled(ch.Category) {
			if ok {
				t.Errorf("%s: %s has bucket %+v; it publishes no request rates", action, ch.Category, b)
			}
			continue
		}
		if !ok || b.Size < 1 || b.RefillPerSecond <= 0 {
			t.Errorf("%s: category %s bucket %+v, ok %v", action, ch.Category, b, ok)
		}
	}
}

// TestEC2Figures pins the EC2 figures of AWS's "Request throttling for the
// Amazon EC2 API" page, so that a change to the table is deliberate.
func TestEC2Figures(t *testing.T) {
	want := map[awsquota.Category]awsquota.Bucket{
		awsquota.NonMutating: {Size: 100, RefillPerSecond: 20}, awsquota.UnfilteredNonMutating: {Size: 50, RefillPerSecond: 10},
		awsquota.Mutating: {Size: 50, RefillPerSecond: 5}, awsquota.RunInstances: {Size: 5, RefillPerSecond: 2},
		awsquota.TerminateInstances: {Size: 100, RefillPerSecond: 5}, awsquota.CreateTags: {Size: 100, RefillPerSecond: 10},
	}
	got := awsquota.Buckets()
	for c, b := range want {
		if got[c] != b {
			t.Errorf("%s: %+v, want %+v", c, got[c], b)
		}
	}
	got[awsquota.Mutating] = awsquota.Bucket{}
	if awsquota.Buckets()[awsquota.Mutating] != want[awsquota.Mutating] {
		t.Error("changing the map Buckets returned changed the table")
	}
}

// TestCategoryOf: bare calls of DescribeInstances and DescribeSecurityGroups
// go to the unfiltered bucket; other actions ignore bare; unknown actions
// are not ok.
func TestCategoryOf(t *testing.T) {
	for _, tc := range []struct {
		action string
		bare   bool
		want   awsquota.Category
		ok     bool
	}{
		{"DescribeInstances", true, awsquota.UnfilteredNonMutating, true},
		{"DescribeInstances", false, awsquota.NonMutating, true},
		{"DescribeSecurityGroups", true, awsquota.UnfilteredNonMutating, true},
		{"DescribeSubnets", true, awsquota.NonMutating, true},
		{"CreateFleet", false, awsquota.Mutating, true},
		{"GetParameter", false, awsquota.SSMGetParameter, true},
		{"ReceiveMessage", false, awsquota.SQSReceive, true},
		{"NoSuchAction", false, "", false},
	} {
		if got, ok := awsquota.CategoryOf(tc.action, tc.bare); got != tc.want || ok != tc.ok {
			t.Errorf("CategoryOf(%s, %v) = %s, %v; want %s, %v", tc.action, tc.bare, got, ok, tc.want, tc.ok)
		}
	}
}
