// Package status is the EC2NodeClass status controller: it resolves each
// EC2NodeClass's selector terms through the AWS providers and writes what
// Karpenter v1 users read first when nothing launches: status.subnets,
// status.securityGroups, status.amis (with their requirements),
// status.instanceProfile, and the conditions SubnetsReady,
// SecurityGroupsReady, AMIsReady, InstanceProfileReady, ValidationSucceeded
// and Ready, each False one with a reason and a message naming the selector
// term that matched nothing. AWS failures are transient: they keep the last
// status, are logged with transient=true and retried with backoff.
package status
