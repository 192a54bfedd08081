package instanceprofile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/go-logr/logr"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
)

// TagRegion is the region tag of the profiles karpx creates (IAM is
// global; the region tells clusters of the same name in two regions apart).
const TagRegion = "topology.kubernetes.io/region"

// maxNameLength is the longest instance profile name IAM accepts
// (IAM API Reference, CreateInstanceProfile: 1 to 128 characters).
const maxNameLength = 128

// hashLength is how many hex digits of the SHA-256 a profile name carries
// (64 bits: collisions between a cluster's classes are not a concern).
const hashLength = 16

// Reasons of *Error, used as the InstanceProfileReady condition reason.
const (
	// ReasonRoleNotFound: spec.role names a role IAM does not know.
	ReasonRoleNotFound = "RoleNotFound"
	// ReasonInstanceProfileNotFound: spec.instanceProfile names a missing profile.
	ReasonInstanceProfileNotFound = "InstanceProfileNotFound"
	// ReasonAccessDenied: the controller's IAM policy denies an IAM action.
	ReasonAccessDenied = "AccessDenied"
	// ReasonNameTaken: the deterministic profile name is taken by a profile
	// this cluster does not own.
	ReasonNameTaken = "InstanceProfileNameTaken"
)

// Error is a failure only a change to the EC2NodeClass, the account's
// roles or the controller's IAM policy can fix.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message names the field and the fix.
	Message string
	// Err is the IAM error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the IAM error.
func (e *Error) Unwrap() error { return e.Err }

// Profile is an instance profile in use.
type Profile struct {
	// Name is the instance profile name launch templates reference.
	Name string
	// ARN is its ARN.
	ARN string
	// Role is the role it holds, "" when none.
	Role string
}

// Provider manages instance profiles. Create it with NewProvider; it is
// safe for concurrent use.
type Provider struct {
	api     ec2api.IAMAPI
	cluster string
	region  string
	log     logr.Logger
	cache   *expirable.LRU[string, Profile] // nil: no caching
}

// NewProvider returns a Provider for cluster in region calling api, caching
// for ttls.Default (no cache when it is zero).
func NewProvider(api ec2api.IAMAPI, cluster, region string, log logr.Logger, ttls cache.TTLs) *Provider {
	p := &Provider{api: api, cluster: cluster, region: region, log: log.WithName("instanceprofile")}
	if ttls.Default > 0 {
		p.cache = expirable.NewLRU[string, Profile](cache.NodeClassEntries, nil, ttls.Default)
	}
	return p
}

// Name returns the instance profile name of class className:
// "<cluster>_<16 hex digits of SHA-256(region/cluster/class)>", the cluster
// name cut so the whole fits IAM's 128 characters.
func (p *Provider) Name(className string) string {
	sum := sha256.Sum256([]byte(p.region + "/" + p.cluster + "/" + className))
	prefix := p.cluster
	if keep := maxNameLength - hashLength - 1; len(prefix) > keep {
		prefix = prefix[:keep]
	}
	return prefix + "_" + hex.EncodeToString(sum[:])[:hashLength]
}

// Path returns the IAM path of the profiles karpx creates:
// /karpx/<region>/<cluster>/ (/karpx/<cluster>/ without a region), the
// path manifests/controller/iam-policy.json scopes its IAM actions to.
func (p *Provider) Path() string {
	if p.region == "" {
		return "/karpx/" + p.cluster + "/"
	}
	return "/karpx/" + p.region + "/" + p.cluster + "/"
}

// tags returns the tags of className's profile.
func (p *Provider) tags(className string) map[string]string {
	return map[string]string{
		instance.ClusterTagKey(p.cluster): "owned",
		instance.TagEKSClusterName:        p.cluster,
		instance.TagNodeClass:             className,
		TagRegion:                         p.region,
	}
}

// Ensure returns className's instance profile holding role, creating it,
// restoring its tags and replacing its role as needed. It returns *Error
// when the role does not exist, IAM denies a call or the name belongs to a
// profile another owner created; other errors are transient.
func (p *Provider) Ensure(ctx context.Context, className, role string) (*Profile, error) {
	name := p.Name(className)
	key := "role/" + name
	if p.cache != nil {
		if got, ok := p.cache.Get(key); ok && got.Role == role {
			return &got, nil
		}
	}
	prof, err := p.get(ctx, name)
	if ec2api.Code(err) == ec2api.CodeNoSuchEntity {
		prof, err = p.create(ctx, className, name)
	}
	if err != nil {
		return nil, p.classify(err, "spec.role", role, name)
	}
	want := p.tags(className)
	owner := tagMap(prof.Tags)[instance.ClusterTagKey(p.cluster)]
	if owner != "owned" {
		return nil, &Error{Reason: ReasonNameTaken, Message: fmt.Sprintf(
			"spec.role %q: instance profile %s exists but is not tagged %s=owned; karpx will not change a profile it did not create: delete or rename it",
			role, name, instance.ClusterTagKey(p.cluster))}
	}
	if missing := missingTags(prof.Tags, want); len(missing) > 0 {
		if _, err := p.api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: missing}); err != nil {
			return nil, p.classify(err, "spec.role", role, name)
		}
	}
	var current []string
	for _, r := range prof.Roles {
		current = append(current, aws.ToString(r.RoleName))
	}
	if !slices.Equal(current, []string{role}) {
		for _, r := range current {
			if _, err := p.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name),
				RoleName: aws.String(r)}); err != nil && ec2api.Code(err) != ec2api.CodeNoSuchEntity {
				return nil, p.classify(err, "spec.role", role, name)
			}
			p.log.Info("Removed replaced role from instance profile", "EC2NodeClass", className, "instanceProfile", name, "role", r)
		}
		if _, err := p.api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name),
			RoleName: aws.String(role)}); err != nil {
			return nil, p.classify(err, "spec.role", role, name)
		}
		p.log.Info("Added role to instance profile", "EC2NodeClass", className, "instanceProfile", name, "role", role)
	}
	out := Profile{Name: name, ARN: aws.ToString(prof.Arn), Role: role}
	if p.cache != nil {
		p.cache.Add(key, out)
	}
	return &out, nil
}

// Get returns the existing instance profile name (spec.instanceProfile),
// *Error when it does not exist or IAM denies reading it, or a transient
// error.
func (p *Provider) Get(ctx context.Context, name string) (*Profile, error) {
	key := "name/" + name
	if p.cache != nil {
		if got, ok := p.cache.Get(key); ok {
			return &got, nil
		}
	}
	prof, err := p.get(ctx, name)
	if err != nil {
		return nil, p.classify(err, "spec.instanceProfile", "", name)
	}
	out := Profile{Name: name, ARN: aws.ToString(prof.Arn)}
	if len(prof.Roles) > 0 {
		out.Role = aws.ToString(prof.Roles[0].RoleName)
	}
	if p.cache != nil {
		p.cache.Add(key, out)
	}
	return &out, nil
}

// Delete deletes className's instance profile (after taking its role out)
// and reports whether one was deleted. A missing profile is success; a
// profile without this cluster's ownership tag is left alone. Errors are
// IAM failures (AccessDenied included), to be retried.
func (p *Provider) Delete(ctx context.Context, className string) (bool, error) {
	name := p.Name(className)
	if p.cache != nil {
		p.cache.Remove("role/" + name)
	}
	prof, err := p.get(ctx, name)
	switch {
	case ec2api.Code(err) == ec2api.CodeNoSuchEntity:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading instance profile %s: %w", name, err)
	case tagMap(prof.Tags)[instance.ClusterTagKey(p.cluster)] != "owned":
		p.log.Info("Not deleting an instance profile this cluster does not own", "EC2NodeClass", className, "instanceProfile", name)
		return false, nil
	}
	for _, r := range prof.Roles {
		if _, err := p.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name),
			RoleName: r.RoleName}); err != nil && ec2api.Code(err) != ec2api.CodeNoSuchEntity {
			return false, fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
		if ec2api.Code(err) == ec2api.CodeNoSuchEntity {
			return false, nil
		}
		return false, fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	p.log.Info("Deleted instance profile", "EC2NodeClass", className, "instanceProfile", name)
	return true, nil
}

func (p *Provider) get(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	if out.InstanceProfile == nil {
		return nil, fmt.Errorf("GetInstanceProfile %s: empty answer", name)
	}
	return out.InstanceProfile, nil
}

// create creates className's profile; a profile created concurrently
// (EntityAlreadyExists) is read instead.
func (p *Provider) create(ctx context.Context, className, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
		Path: aws.String(p.Path()), Tags: sortedTags(p.tags(className))})
	if ec2api.IsAlreadyExists(ec2api.Code(err)) {
		return p.get(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	p.log.Info("Created instance profile", "EC2NodeClass", className, "instanceProfile", name, "path", p.Path())
	return out.InstanceProfile, nil
}

// classify turns IAM answers the class must fix into *Error.
func (p *Provider) classify(err error, field, role, name string) error {
	code := ec2api.Code(err)
	switch {
	case code == ec2api.CodeNoSuchEntity && field == "spec.role":
		return &Error{Reason: ReasonRoleNotFound, Err: err, Message: fmt.Sprintf(
			"spec.role %q: IAM role not found (%s); create the role (trusting ec2.amazonaws.com) or fix spec.role", role, errText(err))}
	case code == ec2api.CodeNoSuchEntity:
		return &Error{Reason: ReasonInstanceProfileNotFound, Err: err, Message: fmt.Sprintf(
			"spec.instanceProfile %q: instance profile not found; create it or use spec.role to let karpx manage one", name)}
	case code == ec2api.CodeAccessDenied || code == "AccessDeniedException" || code == "UnauthorizedOperation":
		subject := fmt.Sprintf("spec.role %q", role)
		if field == "spec.instanceProfile" {
			subject = fmt.Sprintf("spec.instanceProfile %q", name)
		}
		return &Error{Reason: ReasonAccessDenied, Err: err, Message: fmt.Sprintf(
			"%s: IAM denied managing instance profile %s (%s); grant the controller the iam:*InstanceProfile actions of manifests/controller/iam-policy.json", subject, name, errText(err))}
	}
	return fmt.Errorf("instance profile %s: %w", name, err)
}

// errText is the API error's message, or err's text.
func errText(err error) string {
	var ae interface{ ErrorMessage() string }
	if errors.As(err, &ae) && ae.ErrorMessage() != "" {
		return ae.ErrorMessage()
	}
	return err.Error()
}

func tagMap(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// missingTags returns every tag of want, sorted, when have lacks or
// differs on any of them (the IAM policy's aws:RequestTag conditions need
// all of them in the request), else nil.
func missingTags(have []iamtypes.Tag, want map[string]string) []iamtypes.Tag {
	m := tagMap(have)
	differs := false
	for k, v := range want {
		differs = differs || m[k] != v
	}
	if !differs {
		return nil
	}
	return sortedTags(want)
}

// sortedTags renders tags in key order.
func sortedTags(tags map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(tags))
	for k, v := range tags {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	slices.SortFunc(out, func(a, b iamtypes.Tag) int { return strings.Compare(aws.ToString(a.Key), aws.ToString(b.Key)) })
	return out
}
