// Package instance launches, reads and terminates the EC2 instances behind
// NodeClaims.
//
// Launch issues one CreateFleet of Type=instant for one instance: one
// LaunchTemplateConfig per launch template (that is, per AMI) with an
// Override per candidate (instance type, subnet), the on-demand
// "lowest-price" or spot "price-capacity-optimized" allocation strategy,
// and tags on the instance and its volumes. EC2 answers with the instance,
// or with per-override errors that Launch classifies: unfulfillable
// capacity marks the (type, zone, capacity type) unavailable and, when
// nothing launched, yields *cloudprovider.InsufficientCapacityError;
// requests EC2 rejects (InvalidParameter*, Unauthorized*, InvalidAMIID.*)
// yield *cloudprovider.LaunchError; anything else (throttling, 5xx) is
// returned as a transient error.
//
// Instances are found again by ID (Get) or by the cluster's ownership tag
// (List); a terminated instance reads as *cloudprovider.NodeClaimNotFoundError.
package instance
