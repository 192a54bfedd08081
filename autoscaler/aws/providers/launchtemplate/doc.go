// Package launchtemplate creates and reuses the EC2 launch templates karpx
// launches instances from.
//
// A template is named after its content: "karpx/<cluster>/<hash>", where
// hash is the first 16 hex digits of the SHA-256 of the JSON encoding of
// Template (AMI, security groups, userData, block devices, metadata options,
// instance profile, tags, monitoring, public IP setting). Equal content
// therefore always maps to the same name, and a changed EC2NodeClass or AMI
// maps to a new one. Ensure looks a name up (DescribeLaunchTemplates) and
// creates it only when missing; a concurrent creator's
// InvalidLaunchTemplateName.AlreadyExistsException counts as success. Names
// known to exist are cached for cache.DefaultTTL, so steady-state launches
// make no launch-template call at all.
package launchtemplate
