package ami

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/requirements"
)

// DefaultKubernetesVersion is the Kubernetes minor version whose AMIs an
// alias resolves to when none is configured.
const DefaultKubernetesVersion = "1.35"

// aliasVersionLatest is the alias version that follows the newest release.
const aliasVersionLatest = "latest"

// Variant is an AMI's accelerator variant, as in the EKS-optimized AMI
// SSM paths.
type Variant string

// AMI variants. Source: EKS-optimized AMI SSM parameter paths and
// Karpenter's amifamily Variant.
const (
	// VariantStandard boots instance types without GPUs or accelerators.
	VariantStandard Variant = "standard"
	// VariantNvidia boots NVIDIA GPU instance types.
	VariantNvidia Variant = "nvidia"
	// VariantNeuron boots AWS Inferentia/Trainium instance types.
	VariantNeuron Variant = "neuron"
	// VariantUnknown is an AMI whose variant karpx cannot tell; it only
	// requires its architecture.
	VariantUnknown Variant = ""
)

// AMI is a resolved image. The same ID may appear twice with different
// Variants when one image serves both (AL2's GPU AMI boots nvidia and
// neuron types).
type AMI struct {
	// ID is the AMI ID, for example "ami-0123456789abcdef0".
	ID string
	// Name is the AMI name.
	Name string
	// Arch is the kubernetes.io/arch value, "amd64" or "arm64".
	Arch string
	// Variant is the accelerator variant.
	Variant Variant
	// CreationDate is when the image was registered (zero if unknown).
	CreationDate time.Time
	// Deprecated is true when EC2 reports a deprecation time in the past.
	Deprecated bool
	// Requirements are what an instance type must satisfy to boot this AMI
	// (kubernetes.io/arch and the variant's GPU/accelerator keys).
	Requirements []corev1.NodeSelectorRequirement
}

// TermError reports a selector term that cannot resolve whatever EC2
// answers: a malformed alias, an unsupported family, an alias or SSM
// parameter with no value. Its message starts with the field path
// ("spec.amiSelectorTerms[].alias …").
type TermError struct{ Msg string }

func (e *TermError) Error() string { return e.Msg }

func termErrorf(format string, args ...any) error {
	return &TermError{Msg: fmt.Sprintf(format, args...)}
}

// Parameter is one SSM public parameter an alias reads.
type Parameter struct {
	// Name is the SSM parameter path.
	Name string
	// Arch is the kubernetes.io/arch of the AMI it names.
	Arch string
	// Variants are the variants the AMI serves (usually one).
	Variants []Variant
}

// Provider resolves AMI selector terms. It is safe for concurrent use.
type Provider struct {
	api        ec2api.API
	k8sVersion string
	mu         sync.Mutex
	ssmCache   cache.Store[string, string]
	amiCache   cache.Store[string, []AMI]
	clk        clock.PassiveClock
}

// NewProvider returns a Provider; kubernetesVersion ("1.35") selects the
// alias parameters and defaults to DefaultKubernetesVersion when empty.
func NewProvider(api ec2api.API, kubernetesVersion string, ttls cache.TTLs) *Provider {
	if kubernetesVersion == "" {
		kubernetesVersion = DefaultKubernetesVersion
	}
	return &Provider{
		api:        api,
		k8sVersion: kubernetesVersion,
		ssmCache:   cache.New[string, string](cache.SSMEntries, ttls.SSM),
		amiCache:   cache.New[string, []AMI](cache.NodeClassEntries, ttls.Default),
		clk:        clock.RealClock{},
	}
}

// List resolves terms to AMIs, sorted by ID then variant. It returns an
// error naming spec.amiSelectorTerms when an alias is malformed or of an
// unsupported family, or when an alias resolved no parameter; an empty
// result for non-alias terms is not an error (the caller reports it).
func (p *Provider) List(ctx context.Context, terms []v1.AMISelectorTerm) ([]AMI, error) {
	keyBytes, err := json.Marshal(terms)
	if err != nil {
		return nil, fmt.Errorf("encoding AMI selector terms: %w", err)
	}
	key := p.k8sVersion + "/" + string(keyBytes)
	p.mu.Lock()
	defer p.mu.Unlock()
	if amis, ok := p.amiCache.Get(key); ok {
		return amis, nil
	}
	// known maps image IDs found through SSM to the variants they serve.
	known := map[string][]Variant{}
	var queries []*ec2.DescribeImagesInput
	for _, term := range terms {
		switch {
		case term.Alias != "":
			family, version, err := term.Family()
			if err != nil {
				return nil, termErrorf("spec.%v", err)
			}
			params, err := AliasParameters(family, version, p.k8sVersion)
			if err != nil {
				return nil, err
			}
			ids, err := p.resolveParameters(ctx, params, known)
			if err != nil {
				return nil, err
			}
			if len(ids) == 0 {
				return nil, termErrorf("spec.amiSelectorTerms[].alias %q: no SSM parameter of the %s family exists for Kubernetes %s (tried %s, …)", term.Alias, family, p.k8sVersion, params[0].Name)
			}
			queries = append(queries, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{ec2api.Filter("image-id", ids...)}, IncludeDeprecated: aws.Bool(true)})
		case term.SSMParameter != "":
			id, found, err := p.parameter(ctx, term.SSMParameter)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, termErrorf("spec.amiSelectorTerms[].ssmParameter %q: parameter not found", term.SSMParameter)
			}
			queries = append(queries, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{ec2api.Filter("image-id", id)}, IncludeDeprecated: aws.Bool(true)})
		default:
			if in := describeImagesInput(term); in != nil {
				queries = append(queries, in)
			}
		}
	}
	amis, err := p.describe(ctx, queries, known)
	if err != nil {
		return nil, err
	}
	p.amiCache.Add(key, amis)
	return amis, nil
}

// resolveParameters reads params and records each found image ID's variants
// in known; it returns the distinct IDs found.
func (p *Provider) resolveParameters(ctx context.Context, params []Parameter, known map[string][]Variant) ([]string, error) {
	var ids []string
	for _, param := range params {
		id, found, err := p.parameter(ctx, param.Name)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if _, seen := known[id]; !seen {
			ids = append(ids, id)
		}
		known[id] = append(known[id], param.Variants...)
	}
	return ids, nil
}

// parameter reads one SSM parameter through the cache; found is false for
// ParameterNotFound.
func (p *Provider) parameter(ctx context.Context, name string) (string, bool, error) {
	if v, ok := p.ssmCache.Get(name); ok {
		return v, true, nil
	}
	out, err := p.api.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		if ec2api.IsNotFound(ec2api.Code(err)) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("getting SSM parameter %s: %w", name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", false, nil
	}
	v := aws.ToString(out.Parameter.Value)
	p.ssmCache.Add(name, v)
	return v, true, nil
}

func (p *Provider) describe(ctx context.Context, queries []*ec2.DescribeImagesInput, known map[string][]Variant) ([]AMI, error) {
	type key struct {
		id      string
		variant Variant
	}
	byKey := map[key]AMI{}
	for _, in := range queries {
		pager := ec2.NewDescribeImagesPaginator(p.api, in)
		for pager.HasMorePages() {
			out, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing images: %w", err)
			}
			for _, img := range out.Images {
				for _, a := range p.fromImage(img, known) {
					byKey[key{a.ID, a.Variant}] = a
				}
			}
		}
	}
	amis := make([]AMI, 0, len(byKey))
	for _, a := range byKey {
		amis = append(amis, a)
	}
	sort.Slice(amis, func(i, j int) bool {
		if amis[i].ID != amis[j].ID {
			return amis[i].ID < amis[j].ID
		}
		return amis[i].Variant < amis[j].Variant
	})
	return amis, nil
}

// fromImage converts an EC2 image to one AMI per variant it serves.
func (p *Provider) fromImage(img ec2types.Image, known map[string][]Variant) []AMI {
	id := aws.ToString(img.ImageId)
	arch := KubernetesArch(string(img.Architecture))
	created, _ := time.Parse(time.RFC3339, aws.ToString(img.CreationDate))
	deprecated := false
	if dt, err := time.Parse(time.RFC3339, aws.ToString(img.DeprecationTime)); err == nil && dt.Before(p.clk.Now()) {
		deprecated = true
	}
	variants, ok := known[id]
	if !ok {
		variants = VariantsFromName(aws.ToString(img.Name))
	}
	out := make([]AMI, 0, len(variants))
	for _, v := range variants {
		out = append(out, AMI{
			ID: id, Name: aws.ToString(img.Name), Arch: arch, Variant: v,
			CreationDate: created, Deprecated: deprecated,
			Requirements: Requirements(arch, v),
		})
	}
	return out
}

// describeImagesInput builds the DescribeImages request of a non-alias term:
// id → image-id, name → name, tags → tag filters, owner → Owners. A name
// without owner or id searches the account's own and Amazon's images, as
// Karpenter does, so that a public name cannot be spoofed by a third party.
func describeImagesInput(term v1.AMISelectorTerm) *ec2.DescribeImagesInput {
	var filters []ec2types.Filter
	if term.ID != "" {
		filters = append(filters, ec2api.Filter("image-id", term.ID))
	}
	if term.Name != "" {
		filters = append(filters, ec2api.Filter("name", term.Name))
	}
	filters = append(filters, ec2api.TagFilters(term.Tags)...)
	if len(filters) == 0 {
		return nil
	}
	in := &ec2.DescribeImagesInput{Filters: filters, IncludeDeprecated: aws.Bool(true)}
	switch {
	case term.Owner != "":
		in.Owners = strings.Split(term.Owner, ",")
	case term.Name != "" && term.ID == "":
		in.Owners = []string{"self", "amazon"}
	}
	return in
}

// AliasParameters returns the SSM public parameters an alias of family
// (canonical spelling, see v1.AMISelectorTerm.Family) at version ("latest"
// or a release such as "v20251101" or "1.30.0") reads for Kubernetes
// k8sVersion ("1.35"). Paths, per the EKS and Bottlerocket documentation:
//
//	AL2023:       /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<x86_64|arm64>/<standard|nvidia|neuron>/recommended/image_id
//	              (a release replaces "recommended" with amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<release>)
//	Bottlerocket: /aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<x86_64|arm64>/<latest|release>/image_id
//	AL2:          /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/<recommended|amazon-eks[-arm64|-gpu]-node-<k8s>-<release>>/image_id
//
// neuron exists only for x86_64. Windows aliases return an error: karpx
// launches Linux nodes only.
func AliasParameters(family, version, k8sVersion string) ([]Parameter, error) {
	latest := version == aliasVersionLatest
	var params []Parameter
	switch family {
	case v1.AMIFamilyAL2023:
		for _, c := range []struct {
			arch    string
			variant Variant
		}{{"x86_64", VariantStandard}, {"x86_64", VariantNvidia}, {"x86_64", VariantNeuron}, {"arm64", VariantStandard}, {"arm64", VariantNvidia}} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", c.arch, c.variant, k8sVersion, version)
			}
			params = append(params, Parameter{
				Name:     fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8sVersion, c.arch, c.variant, name),
				Arch:     KubernetesArch(c.arch),
				Variants: []Variant{c.variant},
			})
		}
	case v1.AMIFamilyBottlerocket:
		release := aliasVersionLatest
		if !latest {
			release = strings.TrimPrefix(version, "v")
		}
		for _, c := range []struct {
			arch, suffix string
			variant      Variant
		}{{"x86_64", "", VariantStandard}, {"x86_64", "-nvidia", VariantNvidia}, {"arm64", "", VariantStandard}, {"arm64", "-nvidia", VariantNvidia}} {
			params = append(params, Parameter{
				Name:     fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", k8sVersion, c.suffix, c.arch, release),
				Arch:     KubernetesArch(c.arch),
				Variants: []Variant{c.variant},
			})
		}
	case v1.AMIFamilyAL2:
		for _, c := range []struct {
			path, namePart, arch string
			variants             []Variant
		}{
			{"amazon-linux-2", "amazon-eks-node", "x86_64", []Variant{VariantStandard}},
			{"amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", []Variant{VariantStandard}},
			{"amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64", []Variant{VariantNvidia, VariantNeuron}},
		} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("%s-%s-%s", c.namePart, k8sVersion, version)
			}
			params = append(params, Parameter{
				Name:     fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/%s/image_id", k8sVersion, c.path, name),
				Arch:     KubernetesArch(c.arch),
				Variants: c.variants,
			})
		}
	default:
		return nil, termErrorf("spec.amiSelectorTerms[].alias: family %s is not supported by karpx (use al2023, al2 or bottlerocket, or select AMIs by id, name or tags)", family)
	}
	return params, nil
}

// KubernetesArch maps an EC2 architecture ("x86_64", "arm64") to its
// kubernetes.io/arch value ("amd64", "arm64"); other values pass through.
func KubernetesArch(ec2Arch string) string {
	switch ec2Arch {
	case "x86_64", "x86_64_mac":
		return "amd64"
	case "arm64", "arm64_mac":
		return "arm64"
	}
	return ec2Arch
}

// VariantsFromName infers the variants of an image from its name when it
// follows the EKS-optimized or Bottlerocket naming ("amazon-eks-node-al2023-
// x86_64-nvidia-…", "amazon-eks-gpu-node-…", "bottlerocket-aws-k8s-1.35-
// nvidia-…"); otherwise it returns VariantUnknown.
func VariantsFromName(name string) []Variant {
	switch {
	case strings.HasPrefix(name, "amazon-eks-gpu-node-"):
		return []Variant{VariantNvidia, VariantNeuron}
	case strings.HasPrefix(name, "amazon-eks-") || strings.HasPrefix(name, "bottlerocket-aws-k8s-"):
		switch {
		case strings.Contains(name, "-nvidia-"):
			return []Variant{VariantNvidia}
		case strings.Contains(name, "-neuron-"):
			return []Variant{VariantNeuron}
		}
		return []Variant{VariantStandard}
	}
	return []Variant{VariantUnknown}
}

// Requirements returns the requirements of an AMI of this kubernetes.io/arch
// and variant. Source: Karpenter's amifamily Variant.Requirements.
func Requirements(arch string, v Variant) []corev1.NodeSelectorRequirement {
	reqs := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
	switch v {
	case VariantStandard:
		reqs = append(reqs,
			corev1.NodeSelectorRequirement{Key: catalog.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			corev1.NodeSelectorRequirement{Key: LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		)
	case VariantNvidia:
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: catalog.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists})
	case VariantNeuron:
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists})
	}
	return reqs
}

// LabelInstanceAcceleratorCount is the number of AWS Neuron accelerators
// (Inferentia, Trainium) of an instance type. Source: Karpenter AWS
// well-known labels.
const LabelInstanceAcceleratorCount = "karpenter.k8s.aws/instance-accelerator-count"

// Select returns the AMI that fits an instance type with these labels best:
// among the AMIs whose every requirement the labels satisfy, the one with
// the most requirements, then not deprecated, then the newest, then the
// lowest ID. It returns false when no AMI fits.
func Select(amis []AMI, labels map[string]string) (AMI, bool) {
	return NewSelector(amis).Select(labels)
}

// Selector is Select over fixed AMIs, each AMI's requirements parsed once:
// resolving an EC2NodeClass selects an AMI for every instance type of the
// catalogue (about 1,300), where Select parses every AMI's requirements
// again for each type (issue 29: 300 MB of garbage in a 200-pod burst).
// It is safe for concurrent use.
type Selector struct {
	amis []AMI
	reqs []requirements.Requirements
}

// NewSelector parses the requirements of amis for Select.
func NewSelector(amis []AMI) *Selector {
	s := &Selector{amis: amis, reqs: make([]requirements.Requirements, len(amis))}
	for i, a := range amis {
		s.reqs[i] = requirements.Parse(a.Requirements)
	}
	return s
}

// Select returns the AMI that fits an instance type with these labels
// best, as the package-level Select does, or false when none fits.
func (s *Selector) Select(labels map[string]string) (AMI, bool) {
	var best AMI
	found := false
	for i, a := range s.amis {
		if !s.reqs[i].MatchLabels(labels) {
			continue
		}
		if !found || better(a, best) {
			best, found = a, true
		}
	}
	return best, found
}

func better(a, b AMI) bool {
	if len(a.Requirements) != len(b.Requirements) {
		return len(a.Requirements) > len(b.Requirements)
	}
	if a.Deprecated != b.Deprecated {
		return !a.Deprecated
	}
	if !a.CreationDate.Equal(b.CreationDate) {
		return a.CreationDate.After(b.CreationDate)
	}
	return a.ID < b.ID
}

// Status converts AMIs to the EC2NodeClass status form.
func Status(amis []AMI) []v1.AMI {
	out := make([]v1.AMI, 0, len(amis))
	for _, a := range amis {
		reqs := make([]v1.NodeSelectorRequirement, 0, len(a.Requirements))
		for _, r := range a.Requirements {
			reqs = append(reqs, v1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
		}
		out = append(out, v1.AMI{ID: a.ID, Name: a.Name, Deprecated: a.Deprecated, Requirements: reqs})
	}
	return out
}
