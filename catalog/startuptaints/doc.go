// Package startuptaints is the table of node agents' startup taints karpx
// knows: each agent (Cilium, the AWS EBS and EFS CSI node plugins, the Istio
// CNI agent) puts its taint on a new node, or has it put there, and removes
// it once it is ready on the node. Each entry cites where the agent
// documents its taint.
//
// It is the one place these taints are declared: the admission webhook adds
// them to NodePools' startupTaints (webhook.BuiltinTaintRules), and the
// autoscaler does not count them against a node that is still starting
// (clusterstate.AgentTaint), so the two cannot drift. The package is a
// leaf: it imports nothing of karpx, so the webhook, which needs nothing
// from the autoscaler, and the autoscaler can both read it.
package startuptaints
