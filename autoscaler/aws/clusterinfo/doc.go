// Package clusterinfo discovers the cluster settings written into node
// userData, as Karpenter does at start: the cluster CA bundle (from the
// controller's own API server credentials), the Kubernetes minor version
// (the API server's /version, which selects the AMI alias SSM parameters)
// and the service CIDR (the "kubernetes" ServiceCIDR object, else inferred
// from the "kubernetes" Service's cluster IP, which EKS allocates from
// 10.100.0.0/16 or 172.20.0.0/16). Flags override each of them. A read the
// API server answers transiently is asked again, the waits timed on the
// wall clock (Discover) or an injected k8s.io/utils/clock
// (DiscoverWithClock).
package clusterinfo
