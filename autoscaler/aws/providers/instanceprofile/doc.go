// Package instanceprofile gives each EC2NodeClass the IAM instance profile
// its nodes launch with.
//
// For spec.role, Provider.Ensure creates (or reuses) one instance profile
// per cluster and class, named deterministically by Name from the cluster
// name and a hash of the region, cluster and class name, under the IAM path
// /karpx/<region>/<cluster>/, tagged with the cluster's ownership tag, the
// EKS cluster name, the region and the class, and holding the role (an
// instance profile holds one role; a changed spec.role replaces it). For
// spec.instanceProfile, Provider.Get checks that the named profile exists
// and uses it as-is. Provider.Delete, called by the EC2NodeClass finalizer,
// deletes the profile karpx created, and only one carrying this cluster's
// ownership tag.
//
// Results are cached for cache.DefaultTTL in a golang-lru/v2 expirable
// cache, so a class resolved every minute costs at most one IAM read per
// minute. Errors the class must fix (the role does not exist, IAM denies
// the call, the named profile does not exist) are *Error values with a
// condition reason; anything else (throttling, 5xx, timeouts) is transient.
package instanceprofile
