package status

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	awsinstancestatus "github.com/karpx/karpx/autoscaler/aws/providers/instancestatus/statusreport"
)

// printInstanceStatus adds "Instances failing EC2 status checks" under
// the tables: the controller's last DescribeInstanceStatus poll
// (awsinstancestatus.HandlerPath). Like the budget line, a missing
// controller (or one without the endpoint, upstream Karpenter) prints
// nothing and any other failure is one line on stderr.
func (o *Options) printInstanceStatus(ctx context.Context) {
	rep := &awsinstancestatus.Report{}
	err := FetchJSON(ctx, o.Budget, awsinstancestatus.HandlerPath, rep)
	switch {
	case endpointAbsent(err):
		return
	case err != nil:
		fmt.Fprintf(o.ErrOut, "EC2 instance status unavailable: %v\n", err)
		return
	}
	printInstanceReport(o.Out, rep, o.Now())
}

// printInstanceReport writes one line per instance of rep, "NodeClaim
// (node N, nodepool P) i-…: Category name for AGE; <what happens>", and
// the last poll's error; nothing when both are empty.
func printInstanceReport(w io.Writer, rep *awsinstancestatus.Report, now time.Time) {
	if rep.Error != "" {
		fmt.Fprintf(w, "\nEC2 instance status: last poll %s ago failed: %s\n", duration.HumanDuration(now.Sub(rep.Polled)), rep.Error)
	}
	if len(rep.Instances) == 0 {
		return
	}
	fmt.Fprintln(w, "\nInstances failing EC2 status checks:")
	for _, in := range rep.Instances {
		where := "node " + in.Node
		if in.Node == "" {
			where = "no node"
		}
		if in.NodePool != "" {
			where += ", nodepool " + in.NodePool
		}
		fmt.Fprintf(w, "  %s (%s) %s:", in.NodeClaim, where, in.InstanceID)
		for i, d := range in.Details {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s %s for %s", sep, d.Category, d.Name, duration.HumanDuration(now.Sub(d.ImpairedSince)))
		}
		switch {
		case in.Acted:
			fmt.Fprintln(w, "; being replaced")
		case in.DueAt.After(now):
			fmt.Fprintf(w, "; replaced in %s\n", duration.HumanDuration(in.DueAt.Sub(now)))
		default:
			fmt.Fprintln(w, "; due for replacement")
		}
	}
}
