// Package cloudprovider implements the seam, autoscaler/cloudprovider's
// CloudProvider, for Amazon EC2 with Karpenter's resources: karpenter.sh/v1
// NodePools and NodeClaims, and karpenter.k8s.aws/v1 EC2NodeClasses.
//
// CloudProvider composes the providers under autoscaler/aws/providers, one
// per AWS resource (subnet, securitygroup, ami, instancetype, launchtemplate,
// instance, instanceprofile), which are the only code that calls EC2 and
// SSM (through the ec2api.API interface) or IAM (ec2api.IAMAPI). This package reads EC2NodeClasses, chooses what to
// launch from a NodeClaim's requirements, and translates between instances
// and NodeClaims:
//
//   - GetInstanceTypes resolves the NodePool's EC2NodeClass (subnets,
//     security groups, AMIs) and returns the instance types sold in the
//     subnets' zones that some resolved AMI can boot.
//   - Create filters those types by the NodeClaim's requirements and
//     resource requests, prefers spot when the NodeClaim allows it and spot
//     is available, keeps the cheapest MaxInstanceTypes candidates, pairs
//     each with its best-fitting AMI, ensures one launch template per AMI,
//     and launches with one CreateFleet.
//   - Get, List and Delete read and terminate instances by provider ID
//     ("aws:///<zone>/<instance-id>") or by the cluster's ownership tag.
//   - RepairPolicies lists the Node conditions node repair acts on, with
//     their toleration durations (the AWS provider's of Karpenter v1.14).
//
// Errors follow the cloudprovider contract: *NodeClassNotReadyError names
// the EC2NodeClass field to fix, *InsufficientCapacityError and
// *LaunchError come from CreateFleet, *NodeClaimNotFoundError from
// Get/Delete of a gone instance, and any other error is transient.
package cloudprovider
