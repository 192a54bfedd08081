package v1

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AMI family names accepted in spec.amiFamily and as the family part of an
// AMI alias ("family@version"). Source: Karpenter v1 EC2NodeClass API
// (karpenter.k8s.aws/v1, amiFamily enum).
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	AMIFamilyCustom       = "Custom"
)

// EC2NodeClass is the AWS-specific configuration shared by the NodeClaims of
// one or more NodePools: where to launch (subnets, security groups), what to
// boot (AMIs, userData) and how (IAM role, block devices, metadata options).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EC2NodeClassSpec   `json:"spec,omitempty"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClass.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is the desired configuration of the instances launched for
// this class. Field names and semantics follow karpenter.k8s.aws/v1, and so
// do its validation rules (aws/karpenter-provider-aws, EC2NodeClass CRD):
// exactly one of role and instanceProfile; no switch from instanceProfile to
// role on update; amiFamily required unless an alias term is given, and
// when both are given amiFamily is the alias's family or Custom.
//
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this.",rule="(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets instances may launch in; terms
	// are ORed, and the fields within one term are ANDed.
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.all(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms select the security groups attached to
	// instances; terms are ORed.
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// CapacityReservationSelectorTerms select on-demand capacity reservations
	// that may be used.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// PlacementGroupSelector selects one existing EC2 placement group
	// (cluster, partition or spread) by ID or by name; instances launch
	// into it. Not implemented by karpx yet: the webhook and lint deny it
	// (lint/unsupported.go).
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['name', 'id']",rule="has(self.name) || has(self.id)"
	// +kubebuilder:validation:XValidation:message="'name' and 'id' are mutually exclusive",rule="!(has(self.name) && has(self.id))"
	// +optional
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`
	// AssociatePublicIPAddress overrides the subnet's public IP setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// IPPrefixCount is the number of /28 IPv4 prefixes (16 addresses each)
	// assigned to the primary network interface at launch (EC2
	// LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
	// Ipv4PrefixCount); with prefix delegation it raises max pods. Not
	// implemented by karpx yet: denied by the webhook and lint.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
	// AMISelectorTerms select the AMIs; an alias term ("al2023@latest") stands
	// alone and resolves through the public SSM parameters of that family.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily selects the userData format and default block devices when
	// AMIs are not chosen by alias.
	// +kubebuilder:validation:Enum:={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with the userData karpx generates for the AMI family
	// (MIME multipart or shell for AL2/AL2023, TOML for Bottlerocket,
	// PowerShell for Windows). EC2 limits userData to 16 KiB before base64.
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role name used for the generated instance profile.
	// Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:message="role cannot be empty",rule="self != ''"
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing IAM instance profile name.
	// +kubebuilder:validation:XValidation:message="instanceProfile cannot be empty",rule="self != ''"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are added to every resource karpx creates for this class
	// (instances, volumes, launch templates).
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k !='eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster') )"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k !='karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet configures the kubelet on the launched nodes.
	// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true"
	// +kubebuilder:validation:XValidation:message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true"
	// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true"
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings override the AMI family's default volumes; at
	// most one may be the root volume.
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy, when "RAID0", stripes local NVMe instance store
	// volumes and uses them for ephemeral storage.
	// +kubebuilder:validation:Enum:={RAID0}
	// +optional
	InstanceStorePolicy *string `json:"instanceStorePolicy,omitempty"`
	// NetworkInterfaces lay out the instance's network interfaces: each
	// entry is a (networkCardIndex, deviceIndex) slot with an ENA
	// ("interface") or EFA-only ("efa-only") interface. When set, the list
	// has the primary interface (card 0, device 0, "interface"), no slot
	// twice and at most one EFA-only interface per card. At most 150
	// entries. Not implemented by karpx yet: denied by the webhook and lint.
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include a primary interface with interfaceType='interface'",rule="self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card",rule="self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))"
	// +kubebuilder:validation:MaxItems:=150
	// +optional
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`
	// DetailedMonitoring enables 1-minute CloudWatch metrics on instances.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure the instance metadata service (IMDS).
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// ConnectionTracking sets the idle connection-tracking timeouts of the
	// instance's ENA interfaces (EC2 ConnectionTrackingSpecificationRequest);
	// at least one timeout is set. Not implemented by karpx yet: denied by
	// the webhook and lint.
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`
	// Context is a reserved field passed to CreateFleet.
	// +optional
	Context *string `json:"context,omitempty"`
	// CPUOptions are the instance's CPU options (EC2
	// LaunchTemplateCpuOptionsRequest). Not implemented by karpx yet:
	// denied by the webhook and lint.
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`
}

// PlacementGroupSelector selects one placement group; exactly one of ID
// and Name is set (the CRD's rules on spec.placementGroupSelector).
type PlacementGroupSelector struct {
	// ID is a placement group ID, for example "pg-0123456789abcdef0".
	// +kubebuilder:validation:Pattern:="^pg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the placement group's name, at least one character.
	// +kubebuilder:validation:MinLength:=1
	// +optional
	Name string `json:"name,omitempty"`
}

// Interface types of a NetworkInterface (EC2
// LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, InterfaceType).
const (
	// InterfaceTypeInterface is an ENA interface with IP addresses.
	InterfaceTypeInterface = "interface"
	// InterfaceTypeEFAOnly is an EFA interface without IP addresses.
	InterfaceTypeEFAOnly = "efa-only"
)

// NetworkInterface is one network interface slot of an instance.
type NetworkInterface struct {
	// NetworkCardIndex is the network card, 0 or more (EC2 NetworkCardIndex).
	// +kubebuilder:validation:Minimum:=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`
	// DeviceIndex is the device on that card, 0 or more (EC2 DeviceIndex).
	// +kubebuilder:validation:Minimum:=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`
	// InterfaceType is InterfaceTypeInterface or InterfaceTypeEFAOnly.
	// +kubebuilder:validation:Enum:={interface,efa-only}
	// +required
	InterfaceType string `json:"interfaceType"`
}

// ConnectionTracking holds idle timeouts, in seconds, for tracked
// connections (EC2 ConnectionTrackingSpecificationRequest; bounds from the
// EC2 API reference: TCP established 60-432000, UDP stream 60-180, UDP
// 30-60).
//
// +kubebuilder:validation:XValidation:message="at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
type ConnectionTracking struct {
	// TCPEstablishedTimeout is the idle timeout of an established TCP
	// connection, 60-432000 seconds.
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// UDPStreamTimeout is the idle timeout of a UDP flow seen in both
	// directions, 60-180 seconds.
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// UDPTimeout is the idle timeout of a one-way UDP flow, 30-60 seconds.
	// +kubebuilder:validation:Minimum:=30
	// +kubebuilder:validation:Maximum:=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions are an instance's CPU options.
type CPUOptions struct {
	// NestedVirtualization is "enabled" or "disabled" (EC2
	// LaunchTemplateCpuOptionsRequest, NestedVirtualization).
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or by ID.
type SubnetSelectorTerm struct {
	// Tags is a map of key/value tags to match; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a subnet ID, for example "subnet-0123456789abcdef0".
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, ID or name.
type SecurityGroupSelectorTerm struct {
	// Tags is a map of key/value tags to match; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a security group ID, for example "sg-0123456789abcdef0".
	// +kubebuilder:validation:Pattern:="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the security group name (not its Name tag).
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations by tags or ID.
type CapacityReservationSelectorTerm struct {
	// Tags is a map of key/value tags to match; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is a capacity reservation ID, for example "cr-0123456789abcdef0".
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the 12-digit account that owns the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria selects reservations by how they accept
	// instances: "open" (any matching instance) or "targeted" (only
	// launches that name the reservation) (EC2 CapacityReservation,
	// InstanceMatchCriteria).
	// +kubebuilder:validation:Enum:={open,targeted}
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// AMISelectorTerm selects AMIs. An alias ("al2023@latest",
// "bottlerocket@v1.32.0") resolves to the family's public AMIs for every
// architecture and accelerator variant; the other fields query DescribeImages.
type AMISelectorTerm struct {
	// Alias is "family@version"; family is one of al2, al2023, bottlerocket,
	// windows2019, windows2022, windows2025 and version is "latest" or a
	// release. An alias term may not be combined with other terms.
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true"
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags is a map of key/value tags to match; "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is an AMI ID, for example "ami-0123456789abcdef0".
	// +kubebuilder:validation:Pattern:="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the AMI name; wildcards are allowed as in DescribeImages.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner is an account ID or "self"/"amazon".
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter names an SSM parameter whose value is an AMI ID.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// Family returns the AMI family of an alias term in its canonical spelling
// ("AL2023", "Bottlerocket", …) and the version part. It returns an error
// naming amiSelectorTerms[].alias when the alias is not "family@version" or
// the family is unknown.
func (t AMISelectorTerm) Family() (family, version string, err error) {
	name, version, ok := strings.Cut(t.Alias, "@")
	if !ok || name == "" || version == "" {
		return "", "", fmt.Errorf("amiSelectorTerms[].alias %q: want family@version, for example al2023@latest", t.Alias)
	}
	for _, f := range []string{AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025} {
		if strings.EqualFold(f, name) {
			return f, version, nil
		}
	}
	return "", "", fmt.Errorf("amiSelectorTerms[].alias %q: unknown family %q; use al2, al2023, bottlerocket, windows2019, windows2022 or windows2025", t.Alias, name)
}

// KubeletConfiguration is the subset of kubelet settings Karpenter exposes.
type KubeletConfiguration struct {
	// ClusterDNS is the list of cluster DNS server IPs.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods caps the pods on a node.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods per vCPU; 0 means no cap.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved reserves resources for OS daemons (cpu, memory,
	// ephemeral-storage, pid quantities).
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved reserves resources for Kubernetes daemons.
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard are hard eviction thresholds ("memory.available": "100Mi").
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft are soft eviction thresholds.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod is the grace period per soft threshold.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod is the longest pod termination grace, in seconds, during soft eviction.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent triggers image garbage collection, 0-100.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is where image garbage collection stops, 0-100.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enables CPU CFS quota enforcement.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// BlockDeviceMapping is one EBS volume attached at launch.
type BlockDeviceMapping struct {
	// DeviceName is the device, for example "/dev/xvda".
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume. (The volumeInitializationRate rule is here
	// rather than on BlockDevice because gofmt rewrites '' in a type's doc
	// comment.)
	// +kubebuilder:validation:XValidation:message="snapshotID must be set when volumeInitializationRate is set",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the volume used for the node's root and ephemeral storage.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume's settings, as in EC2's EbsBlockDevice.
// A snapshot or a size is required.
//
// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
type BlockDevice struct {
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS is the provisioned I/O operations per second (io1, io2, gp3).
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput is gp3 throughput in MiB/s.
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeInitializationRate is in MiB/s, 100-300 (EC2 CreateVolume,
	// VolumeInitializationRate); it applies to a volume restored from a
	// snapshot, so snapshotID must be set with it.
	// +kubebuilder:validation:Minimum:=100
	// +kubebuilder:validation:Maximum:=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
	// VolumeSize is a quantity such as "100Gi".
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern:="^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
	// +optional
	VolumeSize *string `json:"volumeSize,omitempty"`
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// MetadataOptions configure IMDS on launched instances.
type MetadataOptions struct {
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is the IMDS PUT hop limit, 1-64.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}
