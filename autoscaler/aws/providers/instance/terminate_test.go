package instance

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// terminateAPI answers TerminateInstances with out or err and counts the
// calls; every other call panics (the embedded API is nil).
type terminateAPI struct {
	ec2api.API
	out   *ec2.TerminateInstancesOutput
	err   error
	calls int
}

func (f *terminateAPI) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.calls++
	return f.out, f.err
}

func stateChange(id string, state ec2types.InstanceStateName) ec2types.InstanceStateChange {
	return ec2types.InstanceStateChange{InstanceId: aws.String(id), CurrentState: &ec2types.InstanceState{Name: state},
		PreviousState: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning}}
}

// TestTerminateReturnsTheAnsweredState checks that Terminate reports the
// CurrentState EC2 answered for its own instance, "" when the answer does
// not name it (the control: another instance's state is not taken), and
// NodeClaimNotFoundError for an unknown instance, with one call each.
func TestTerminateReturnsTheAnsweredState(t *testing.T) {
	const id = "i-0123456789abcdef0"
	for _, tt := range []struct {
		name      string
		api       *terminateAPI
		want      string
		wantNotFd bool
	}{
		{"shutting-down", &terminateAPI{out: &ec2.TerminateInstancesOutput{TerminatingInstances: []ec2types.InstanceStateChange{
			stateChange(id, ec2types.InstanceStateNameShuttingDown)}}}, "shutting-down", false},
		{"terminated", &terminateAPI{out: &ec2.TerminateInstancesOutput{TerminatingInstances: []ec2types.InstanceStateChange{
			stateChange(id, ec2types.InstanceStateNameTerminated)}}}, "terminated", false},
		{"answer about another instance (control)", &terminateAPI{out: &ec2.TerminateInstancesOutput{TerminatingInstances: []ec2types.InstanceStateChange{
			stateChange("i-0fedcba9876543210", ec2types.InstanceStateNameShuttingDown)}}}, "", false},
		{"unknown instance", &terminateAPI{err: &smithy.GenericAPIError{Code: ec2api.CodeInstanceNotFound, Message: "The instance ID '" + id + "' does not exist"}}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewProvider(tt.api, "demo", nil)
			got, err := p.Terminate(context.Background(), id)
			if got != tt.want || cloudprovider.IsNodeClaimNotFound(err) != tt.wantNotFd || (!tt.wantNotFd && err != nil) || tt.api.calls != 1 {
				t.Errorf("Terminate = %q, %v after %d calls; want %q (not found %t) after 1", got, err, tt.api.calls, tt.want, tt.wantNotFd)
			}
		})
	}
}
