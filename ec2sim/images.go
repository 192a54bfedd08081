package ec2sim

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Public EKS AMIs. Names follow the published conventions of the EKS
// optimized AMIs (awslabs/amazon-eks-ami) and Bottlerocket (bottlerocket-os).
const (
	// al2023Release is the AMI release the "recommended" aliases resolve to.
	al2023Release = "v20251101"
	// bottlerocketRelease is the Bottlerocket version "latest" resolves to.
	bottlerocketRelease = "1.50.0"
	bottlerocketCommit  = "5d9ac849"
	// imageEpoch is the creation date of seeded AMIs.
	imageEpochRFC3339 = "2025-11-01T08:00:00Z"

	familyAL2023       = "al2023"
	familyAL2          = "al2"
	familyBottlerocket = "bottlerocket"
	familyWindows      = "windows"
)

var imageEpoch, _ = time.Parse(time.RFC3339, imageEpochRFC3339)

// amiID derives a stable id from an AMI name, so an alias resolves to the
// same id in every run.
func amiID(name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("ami-0%016x", h.Sum64())
}

// seedImages registers the public AMIs of Config.KubernetesVersion.
func (s *Simulator) seedImages() {
	v := s.cfg.KubernetesVersion
	for _, p := range []string{
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/arm64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/arm64/nvidia/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/neuron/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2-arm64/recommended/image_id",
		"/aws/service/eks/optimized-ami/%s/amazon-linux-2-gpu/recommended/image_id",
		"/aws/service/bottlerocket/aws-k8s-%s/x86_64/latest/image_id",
		"/aws/service/bottlerocket/aws-k8s-%s/arm64/latest/image_id",
		"/aws/service/bottlerocket/aws-k8s-%s-nvidia/x86_64/latest/image_id",
		"/aws/service/bottlerocket/aws-k8s-%s-nvidia/arm64/latest/image_id",
	} {
		img, ok := publicImageForParameter(fmt.Sprintf(p, v))
		if !ok {
			panic("ec2sim: seed parameter does not resolve: " + p)
		}
		s.addImage(img)
	}
}

// addImage registers img (defaulting ID, owner and creation date) and
// returns the stored copy; an image with the same id is kept as is.
func (s *Simulator) addImage(img Image) *Image {
	if img.ID == "" {
		img.ID = amiID(img.Name)
	}
	if old, ok := s.images[img.ID]; ok {
		return old
	}
	if img.OwnerID == "" {
		img.OwnerID = eksAMIOwner
	}
	if img.CreationDate.IsZero() {
		img.CreationDate = imageEpoch
	}
	if img.Architecture == "" {
		img.Architecture = "x86_64"
	}
	s.images[img.ID] = &img
	s.imageOrder = append(s.imageOrder, img.ID)
	return &img
}

var (
	reAL2023Param = regexp.MustCompile(`^/aws/service/eks/optimized-ami/(\d+\.\d+)/amazon-linux-2023/(x86_64|arm64)/(standard|nvidia|neuron)/(recommended|amazon-eks-node-al2023-[a-z0-9_]+-[a-z]+-\d+\.\d+-v\d{8})/image_id$`)
	reAL2Param    = regexp.MustCompile(`^/aws/service/eks/optimized-ami/(\d+\.\d+)/amazon-linux-2(|-arm64|-gpu)/(recommended|amazon-eks-(?:arm64-|gpu-)?node-\d+\.\d+-v\d{8})/image_id$`)
	reBRParam     = regexp.MustCompile(`^/aws/service/bottlerocket/aws-k8s-(\d+\.\d+)(-nvidia)?/(x86_64|arm64)/(latest|\d+\.\d+\.\d+(?:-[0-9a-f]{8})?)/image_id$`)
	reWinParam    = regexp.MustCompile(`^/aws/service/ami-windows-latest/Windows_Server-(2019|2022|2025)-English-(Core|Full)-EKS_Optimized-(\d+\.\d+)/image_id$`)
)

// publicImageForParameter maps a public SSM AMI parameter to the AMI it
// names. Any Kubernetes minor version is accepted.
func publicImageForParameter(path string) (Image, bool) {
	if m := reAL2023Param.FindStringSubmatch(path); m != nil {
		ver, arch, variant, rel := m[1], m[2], m[3], m[4]
		if variant == "neuron" && arch == "arm64" {
			return Image{}, false
		}
		name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, ver, al2023Release)
		if rel != "recommended" {
			if !strings.HasPrefix(rel, fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-", arch, variant, ver)) {
				return Image{}, false
			}
			name = rel
		}
		return Image{Name: name, Architecture: arch, OwnerAlias: "amazon", Family: familyAL2023,
			Description: fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, %s)", ver, variant)}, true
	}
	if m := reAL2Param.FindStringSubmatch(path); m != nil {
		ver, variant, rel := m[1], m[2], m[3]
		arch, infix := "x86_64", ""
		switch variant {
		case "-arm64":
			arch, infix = "arm64", "arm64-"
		case "-gpu":
			infix = "gpu-"
		}
		name := fmt.Sprintf("amazon-eks-%snode-%s-%s", infix, ver, al2023Release)
		if rel != "recommended" {
			if !strings.HasPrefix(rel, fmt.Sprintf("amazon-eks-%snode-%s-", infix, ver)) {
				return Image{}, false
			}
			name = rel
		}
		return Image{Name: name, Architecture: arch, OwnerAlias: "amazon", Family: familyAL2,
			Description: fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", ver)}, true
	}
	if m := reBRParam.FindStringSubmatch(path); m != nil {
		ver, nvidia, arch, rel := m[1], m[2], m[3], m[4]
		if rel == "latest" {
			rel = bottlerocketRelease + "-" + bottlerocketCommit
		} else if !strings.Contains(rel, "-") {
			rel += "-" + bottlerocketCommit
		}
		nameArch := map[string]string{"x86_64": "x86_64", "arm64": "aarch64"}[arch]
		name := fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s", ver, nvidia, nameArch, rel)
		return Image{Name: name, Architecture: arch, OwnerAlias: "amazon", Family: familyBottlerocket,
			Description: "bottlerocket-aws-k8s-" + ver + nvidia}, true
	}
	if m := reWinParam.FindStringSubmatch(path); m != nil {
		name := fmt.Sprintf("Windows_Server-%s-English-%s-EKS_Optimized-%s-2025.11.11", m[1], m[2], m[3])
		return Image{Name: name, Architecture: "x86_64", OwnerAlias: "amazon", Family: familyWindows,
			Description: "Microsoft Windows Server EKS optimized AMI"}, true
	}
	return Image{}, false
}

type xmlEBS struct {
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type xmlBDM struct {
	DeviceName string  `xml:"deviceName"`
	Ebs        *xmlEBS `xml:"ebs,omitempty"`
}

type xmlImage struct {
	ImageID            string   `xml:"imageId"`
	ImageLocation      string   `xml:"imageLocation"`
	ImageState         string   `xml:"imageState"`
	ImageOwnerID       string   `xml:"imageOwnerId"`
	CreationDate       string   `xml:"creationDate"`
	IsPublic           bool     `xml:"isPublic"`
	Architecture       string   `xml:"architecture"`
	ImageType          string   `xml:"imageType"`
	Platform           string   `xml:"platform,omitempty"`
	PlatformDetails    string   `xml:"platformDetails"`
	UsageOperation     string   `xml:"usageOperation"`
	ImageOwnerAlias    string   `xml:"imageOwnerAlias,omitempty"`
	Name               string   `xml:"name"`
	Description        string   `xml:"description,omitempty"`
	RootDeviceType     string   `xml:"rootDeviceType"`
	RootDeviceName     string   `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlBDM `xml:"blockDeviceMapping>item"`
	VirtualizationType string   `xml:"virtualizationType"`
	Tags               []xmlTag `xml:"tagSet>item,omitempty"`
	Hypervisor         string   `xml:"hypervisor"`
	EnaSupport         bool     `xml:"enaSupport"`
	SriovNetSupport    string   `xml:"sriovNetSupport"`
	BootMode           string   `xml:"bootMode,omitempty"`
	DeprecationTime    string   `xml:"deprecationTime"`
}

type describeImagesResponse struct {
	respMeta
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

func (img *Image) toXML() xmlImage {
	x := xmlImage{
		ImageID: img.ID, ImageLocation: img.OwnerID + "/" + img.Name, ImageState: "available", ImageOwnerID: img.OwnerID,
		CreationDate: ec2Time(img.CreationDate), IsPublic: img.OwnerAlias == "amazon", Architecture: img.Architecture,
		ImageType: "machine", PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances", ImageOwnerAlias: img.OwnerAlias,
		Name: img.Name, Description: img.Description, RootDeviceType: "ebs", RootDeviceName: "/dev/xvda",
		VirtualizationType: "hvm", Tags: xmlTags(img.Tags), Hypervisor: "xen", EnaSupport: true, SriovNetSupport: "simple",
		DeprecationTime: ec2Time(img.CreationDate.AddDate(2, 0, 0)),
	}
	snap := "snap-0" + img.ID[len("ami-0"):]
	x.BlockDeviceMapping = []xmlBDM{{DeviceName: "/dev/xvda", Ebs: &xmlEBS{DeleteOnTermination: true, SnapshotID: snap, VolumeSize: 20, VolumeType: "gp3"}}}
	switch img.Family {
	case familyBottlerocket:
		x.BlockDeviceMapping[0].Ebs.VolumeSize = 2
		x.BlockDeviceMapping = append(x.BlockDeviceMapping, xmlBDM{DeviceName: "/dev/xvdb",
			Ebs: &xmlEBS{DeleteOnTermination: true, SnapshotID: snap + "b", VolumeSize: 20, VolumeType: "gp2"}})
	case familyWindows:
		x.Platform, x.PlatformDetails, x.UsageOperation, x.RootDeviceName = "windows", "Windows", "RunInstances:0002", "/dev/sda1"
		x.BlockDeviceMapping[0].DeviceName = "/dev/sda1"
		x.BlockDeviceMapping[0].Ebs.VolumeSize = 50
	case familyAL2023:
		x.BootMode = "uefi-preferred"
	}
	if img.Architecture == "arm64" {
		x.BootMode = "uefi"
	}
	return x
}

func (s *Simulator) describeImages(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlImage{}, imageField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("ImageId")
	owners := req.p.list("Owner")
	for _, id := range ids {
		if !reAMIID.MatchString(id) {
			return nil, errMalformedID("InvalidAMIID.Malformed", id, "ami-")
		}
	}
	offset, size, perr := req.p.pageRange(5, 1000, 1<<30)
	if perr != nil {
		return nil, perr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if s.images[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, newError("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", quoteList(missing))
	}
	m := matching[xmlImage]{fs: fs, field: imageField}
	for _, id := range s.imageOrder {
		img := s.images[id]
		if len(ids) > 0 && !contains(ids, id) {
			continue
		}
		if len(owners) > 0 && !ownedBy(img, owners, s.cfg.AccountID) {
			continue
		}
		x := img.toXML()
		m.add(x, tagSet(img.Tags))
	}
	return answer(&m, offset, size, func(page []xmlImage, next string) any { return &describeImagesResponse{Images: page, NextToken: next} })
}

// ownedBy implements DescribeImages' Owner list: account ids, "self" and
// the aliases "amazon" and "aws-marketplace".
func ownedBy(img *Image, owners []string, account string) bool {
	for _, o := range owners {
		switch {
		case o == "self" && img.OwnerID == account,
			o == img.OwnerID,
			o != "" && o == img.OwnerAlias:
			return true
		}
	}
	return false
}

func imageField(x xmlImage, name string) ([]string, bool) {
	switch name {
	case "name":
		return one(x.Name), true
	case "image-id":
		return one(x.ImageID), true
	case "architecture":
		return one(x.Architecture), true
	case "owner-id":
		return one(x.ImageOwnerID), true
	case "owner-alias":
		return one(x.ImageOwnerAlias), true
	case "state":
		return one(x.ImageState), true
	case "image-type":
		return one(x.ImageType), true
	case "is-public":
		return one(strconv.FormatBool(x.IsPublic)), true
	case "virtualization-type":
		return one(x.VirtualizationType), true
	case "root-device-type":
		return one(x.RootDeviceType), true
	case "root-device-name":
		return one(x.RootDeviceName), true
	case "platform-details":
		return one(x.PlatformDetails), true
	case "platform":
		return one(x.Platform), true
	case "description":
		return one(x.Description), true
	case "hypervisor":
		return one(x.Hypervisor), true
	}
	return nil, false
}
