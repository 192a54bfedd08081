// Package cluster connects karpx's kubectl subcommands to the API server.
//
// A Factory turns kubectl's global flags (--kubeconfig, --context, --server,
// …, carried by genericclioptions.ConfigFlags) into a controller-runtime
// client whose Scheme knows Karpenter's karpenter.sh/v1 kinds (NodePool,
// NodeClaim), karpx's karpenter.k8s.aws/v1 EC2NodeClass and the built-in
// Kubernetes kinds, and into a discovery client. Subcommands take a Factory
// instead of building clients themselves, so their tests can pass a
// StaticFactory holding fake clients.
//
// The package also turns the API errors every subcommand meets the same way
// (resource type not served because the CRDs are missing) into one message.
package cluster
