package scheduling_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// The provisioner gathers pending pods, each NodePool with the instance types
// its EC2NodeClass can launch (CloudProvider.GetInstanceTypes), and the
// nodes still starting; Solve says what to launch, and each plan becomes a
// NodeClaim to create.
func Example() {
	web := pods(12, "web", "500m", "512Mi")
	batch := pods(2, "batch", "4", "16Gi", nodeSelector(corev1.LabelTopologyZone, "us-east-1b"))
	arm := pod("arm", "1", "1Gi", nodeSelector(corev1.LabelArchStable, "arm64"))

	res := scheduling.Solve(scheduling.Input{
		Pods: append(append(web, batch...), arm),
		NodePools: []scheduling.NodePoolInput{{
			NodePool:      generalPurpose(),
			InstanceTypes: allTypes(), // from CloudProvider.GetInstanceTypes
		}},
		ExistingNodes: []scheduling.ExistingNode{{
			Name:      "ip-10-0-1-23.ec2.internal",
			Labels:    map[string]string{corev1.LabelArchStable: "amd64"},
			Available: resources("cpu", "1", "memory", "2Gi", "pods", "20"),
		}},
	})

	for node, ps := range res.ExistingPlacements {
		fmt.Printf("%d pods wait for in-flight node %s\n", len(ps), node)
	}
	for _, plan := range res.NewNodeClaims {
		nc := plan.NodeClaim() // create this with the API client
		cpu := plan.Requests[corev1.ResourceCPU]
		fmt.Printf("NodeClaim %s… for %d pods (cpu %s): %s at $%.4f/h, %d types, zones %v\n",
			nc.GenerateName, len(plan.Pods), cpu.String(), plan.InstanceTypes[0].Name, plan.PriceUSDPerHour,
			len(plan.InstanceTypes), valuesOf(plan, corev1.LabelTopologyZone))
	}
	for _, err := range res.Unschedulable {
		fmt.Println("unschedulable:", err)
	}
	// Output:
	// 2 pods wait for in-flight node ip-10-0-1-23.ec2.internal
	// NodeClaim general-purpose-… for 12 pods (cpu 13): m5a.4xlarge at $0.6880/h, 60 types, zones [us-east-1b]
	// unschedulable: no instance type in NodePool "general-purpose" satisfies nodeSelector kubernetes.io/arch=arm64 (the NodePool allows kubernetes.io/arch In [amd64])
}
