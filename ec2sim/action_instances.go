package ec2sim

import (
	"strconv"
	"strings"
	"time"
)

// DescribeInstances, TerminateInstances and CreateTags, and the instance
// XML shared with CreateFleet and RunInstances.

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func stateXML(name string) xmlState { return xmlState{Code: stateCodes[name], Name: name} }

type xmlPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	GroupName          string `xml:"groupName"`
	Tenancy            string `xml:"tenancy"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlENIAttachment struct {
	AttachmentID string `xml:"attachmentId"`
	DeviceIndex  int    `xml:"deviceIndex"`
	Status       string `xml:"status"`
	AttachTime   string `xml:"attachTime"`
	DeleteOnTerm bool   `xml:"deleteOnTermination"`
}

type xmlENI struct {
	NetworkInterfaceID string           `xml:"networkInterfaceId"`
	SubnetID           string           `xml:"subnetId"`
	VpcID              string           `xml:"vpcId"`
	OwnerID            string           `xml:"ownerId"`
	Status             string           `xml:"status"`
	PrivateIPAddress   string           `xml:"privateIpAddress,omitempty"`
	PrivateDNSName     string           `xml:"privateDnsName,omitempty"`
	SourceDestCheck    bool             `xml:"sourceDestCheck"`
	InterfaceType      string           `xml:"interfaceType"`
	Groups             []xmlGroup       `xml:"groupSet>item"`
	Attachment         xmlENIAttachment `xml:"attachment"`
}

type xmlCPUOptions struct {
	CoreCount      int64 `xml:"coreCount"`
	ThreadsPerCore int64 `xml:"threadsPerCore"`
}

type xmlPrivateDNSOptions struct {
	HostnameType string `xml:"hostnameType"`
}

type xmlInstance struct {
	InstanceID            string               `xml:"instanceId"`
	ImageID               string               `xml:"imageId"`
	InstanceState         xmlState             `xml:"instanceState"`
	PrivateDNSName        string               `xml:"privateDnsName"`
	DNSName               string               `xml:"dnsName"`
	Reason                string               `xml:"reason"`
	AmiLaunchIndex        int                  `xml:"amiLaunchIndex"`
	InstanceType          string               `xml:"instanceType"`
	LaunchTime            string               `xml:"launchTime"`
	Placement             xmlPlacement         `xml:"placement"`
	Monitoring            xmlState             `xml:"monitoring"`
	SubnetID              string               `xml:"subnetId,omitempty"`
	VpcID                 string               `xml:"vpcId,omitempty"`
	PrivateIPAddress      string               `xml:"privateIpAddress,omitempty"`
	SourceDestCheck       bool                 `xml:"sourceDestCheck"`
	Groups                []xmlGroup           `xml:"groupSet>item"`
	StateReason           *xmlStateReason      `xml:"stateReason,omitempty"`
	Architecture          string               `xml:"architecture"`
	RootDeviceType        string               `xml:"rootDeviceType"`
	RootDeviceName        string               `xml:"rootDeviceName"`
	InstanceLifecycle     string               `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string               `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string               `xml:"virtualizationType"`
	Tags                  []xmlTag             `xml:"tagSet>item,omitempty"`
	Hypervisor            string               `xml:"hypervisor"`
	NetworkInterfaces     []xmlENI             `xml:"networkInterfaceSet>item,omitempty"`
	EbsOptimized          bool                 `xml:"ebsOptimized"`
	EnaSupport            bool                 `xml:"enaSupport"`
	CPUOptions            xmlCPUOptions        `xml:"cpuOptions"`
	BootMode              string               `xml:"bootMode,omitempty"`
	PlatformDetails       string               `xml:"platformDetails"`
	UsageOperation        string               `xml:"usageOperation"`
	PrivateDNSNameOptions xmlPrivateDNSOptions `xml:"privateDnsNameOptions"`
	// CapacityReservationID and CapacityReservationSpecification: the
	// reservation the instance runs in and its launch template's
	// preference and target (EC2 API Reference, Instance), which
	// Karpenter reads to tell a reserved instance from an on-demand one.
	CapacityReservationID            string              `xml:"capacityReservationId,omitempty"`
	CapacityReservationSpecification *xmlCRSpecification `xml:"capacityReservationSpecification,omitempty"`
}

type xmlCRTarget struct {
	CapacityReservationID string `xml:"capacityReservationId"`
}

type xmlCRSpecification struct {
	CapacityReservationPreference string       `xml:"capacityReservationPreference"`
	CapacityReservationTarget     *xmlCRTarget `xml:"capacityReservationTarget,omitempty"`
}

func (s *Simulator) instanceXML(in *instance, now time.Time) xmlInstance {
	st := in.state(now, &s.cfg)
	x := xmlInstance{
		InstanceID: in.id, ImageID: in.imageID, InstanceState: stateXML(st), PrivateDNSName: in.privateDNS,
		AmiLaunchIndex: in.launchIndex, InstanceType: in.instanceType, LaunchTime: ec2Time(in.launchTime),
		Placement:  xmlPlacement{AvailabilityZone: in.zone, AvailabilityZoneID: zoneID(s.cfg.Region, in.zone), Tenancy: "default"},
		Monitoring: xmlState{Name: "disabled"}, SubnetID: in.subnetID, VpcID: in.vpcID, PrivateIPAddress: in.privateIP,
		SourceDestCheck: true, Architecture: in.arch, RootDeviceType: "ebs", RootDeviceName: "/dev/xvda",
		VirtualizationType: "hvm", Tags: xmlTags(in.tags), Hypervisor: "xen", EbsOptimized: true, EnaSupport: true,
		PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances", PrivateDNSNameOptions: xmlPrivateDNSOptions{HostnameType: "ip-name"},
	}
	if info, ok := typeInfo(in.instanceType); ok {
		x.CPUOptions = xmlCPUOptions{CoreCount: info.VCpuInfo.DefaultCores, ThreadsPerCore: info.VCpuInfo.DefaultThreadsPerCore}
	}
	if in.capacityType == capacitySpot {
		x.InstanceLifecycle = "spot"
		x.SpotInstanceRequestID = "sir-" + in.id[len("i-0"):len("i-0")+8]
	}
	if in.capacityBlock {
		x.InstanceLifecycle = marketTypeCapacityBlock
	}
	if in.crPreference != "" {
		x.CapacityReservationSpecification = &xmlCRSpecification{CapacityReservationPreference: in.crPreference}
	}
	x.CapacityReservationID = s.instanceReservationLocked(in, now)
	if in.crTarget != "" {
		x.CapacityReservationSpecification.CapacityReservationTarget = &xmlCRTarget{CapacityReservationID: in.crTarget}
	}
	for _, g := range in.securityGroups {
		x.Groups = append(x.Groups, xmlGroup{GroupID: g, GroupName: s.sgName(g)})
	}
	if st == StateShuttingDown || st == StateTerminated {
		end := in.endedAt(now).UTC().Format("2006-01-02 15:04:05 MST")
		switch {
		case in.spotReclaimed(now):
			x.Reason = "Service initiated (" + end + ")"
			x.StateReason = &xmlStateReason{Code: stateReasonSpot, Message: stateReasonSpot + ": Spot instance termination"}
		case in.blockReclaimed(now):
			x.Reason = "Service initiated (" + end + ")"
			x.StateReason = &xmlStateReason{Code: stateReasonCapacityBlock, Message: stateReasonCapacityBlock + ": Capacity Block ended"}
		default:
			x.Reason = "User initiated (" + end + ")"
			x.StateReason = &xmlStateReason{Code: stateReasonUser, Message: stateReasonUser + ": User initiated shutdown"}
		}
	}
	if st == StateTerminated {
		// Terminated instances lose their network interfaces and addresses.
		x.PrivateDNSName, x.PrivateIPAddress, x.SubnetID, x.VpcID = "", "", "", ""
		return x
	}
	x.NetworkInterfaces = []xmlENI{{
		NetworkInterfaceID: "eni-0" + in.id[len("i-0"):], SubnetID: in.subnetID, VpcID: in.vpcID, OwnerID: s.cfg.AccountID,
		Status: "in-use", PrivateIPAddress: in.privateIP, PrivateDNSName: in.privateDNS, SourceDestCheck: true, InterfaceType: "interface",
		Groups: x.Groups, Attachment: xmlENIAttachment{AttachmentID: "eni-attach-0" + in.id[len("i-0"):], Status: "attached",
			AttachTime: ec2Time(in.launchTime), DeleteOnTerm: true},
	}}
	return x
}

func (s *Simulator) sgName(id string) string {
	for _, g := range s.securityGroups {
		if g.ID == id {
			return g.Name
		}
	}
	return ""
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	RequesterID   string        `xml:"requesterId,omitempty"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	respMeta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

// lookupInstancesLocked validates instance ids: malformed ids first, then
// unknown ones, with EC2's codes and messages.
func (s *Simulator) lookupInstancesLocked(ids []string) *APIError {
	for _, id := range ids {
		if !reInstanceID.MatchString(id) {
			return errMalformedID("InvalidInstanceID.Malformed", id, "i-")
		}
	}
	var missing []string
	for _, id := range ids {
		if s.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return newError("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	default:
		return newError("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", quoteList(missing))
	}
}

func (s *Simulator) instanceField(now time.Time) fieldFunc[*instance] {
	return func(in *instance, name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return one(in.id), true
		case "instance-state-name":
			return one(in.state(now, &s.cfg)), true
		case "instance-state-code":
			return one(strconv.Itoa(stateCodes[in.state(now, &s.cfg)])), true
		case "instance-type":
			return one(in.instanceType), true
		case "availability-zone":
			return one(in.zone), true
		case "subnet-id":
			return one(in.subnetID), true
		case "vpc-id":
			return one(in.vpcID), true
		case "image-id":
			return one(in.imageID), true
		case "private-dns-name":
			return one(in.privateDNS), true
		case "private-ip-address":
			return one(in.privateIP), true
		case "reservation-id":
			return one(in.reservationID), true
		case "instance-lifecycle":
			if in.capacityType == capacitySpot {
				return one("spot"), true
			}
			return nil, true
		case "architecture":
			return one(in.arch), true
		case "instance.group-id", "group-id":
			return in.securityGroups, true
		}
		return nil, false
	}
}

func (s *Simulator) describeInstances(req *request) (any, error) {
	fs, err := req.p.filters()
	if err != nil {
		return nil, err
	}
	ids := req.p.list("InstanceId")
	if len(ids) > 0 && req.p.has("MaxResults") {
		return nil, newError(CodeInvalidParameterCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	offset, size, perr := req.p.pageRange(5, 1000, 1<<30)
	if perr != nil {
		return nil, perr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked(req.now)
	if e := s.lookupInstancesLocked(ids); e != nil {
		return nil, e
	}
	field := s.instanceField(req.now)
	if e := checkFilters(fs, &instance{}, field); e != nil {
		return nil, e
	}
	var matched []*instance
	for _, id := range s.order {
		in := s.instances[id]
		if len(ids) > 0 && !contains(ids, id) {
			continue
		}
		ok, ferr := matchFilters(in, in.tags, fs, field)
		if ferr != nil {
			return nil, ferr
		}
		if ok {
			matched = append(matched, in)
		}
	}
	lo, hi, next := paginate(len(matched), offset, size)
	out := &describeInstancesResponse{NextToken: next}
	for _, in := range matched[lo:hi] {
		x := s.instanceXML(in, req.now)
		if n := len(out.Reservations); n > 0 && out.Reservations[n-1].ReservationID == in.reservationID {
			out.Reservations[n-1].Instances = append(out.Reservations[n-1].Instances, x)
			continue
		}
		r := xmlReservation{ReservationID: in.reservationID, OwnerID: s.cfg.AccountID, Instances: []xmlInstance{x}}
		if in.fleetID != "" {
			r.RequesterID = "AIDAEC2FLEETSIMULATOR" // EC2 Fleet launches on the requester's behalf
		}
		out.Reservations = append(out.Reservations, r)
	}
	return out, nil
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	respMeta
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

func (s *Simulator) terminateInstances(req *request) (any, error) {
	ids := req.p.list("InstanceId")
	if len(ids) == 0 {
		return nil, errMissingParameter("InstanceId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lookupInstancesLocked(ids); e != nil {
		return nil, e
	}
	out := &terminateInstancesResponse{}
	for _, id := range ids {
		in := s.instances[id]
		prev := in.state(req.now, &s.cfg)
		if in.endedAt(req.now).IsZero() {
			in.terminatedAt = req.now
			s.log.V(1).Info("Terminating instance", "instanceID", id, "previousState", prev)
		}
		out.Instances = append(out.Instances, xmlStateChange{InstanceID: id,
			CurrentState: stateXML(in.state(req.now, &s.cfg)), PreviousState: stateXML(prev)})
	}
	return out, nil
}

type returnResponse struct {
	respMeta
	Return bool `xml:"return"`
}

func (s *Simulator) createTags(req *request) (any, error) {
	ids := req.p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errMissingParameter("ResourceId")
	}
	tags, err := req.p.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, errMissingParameter("Tag")
	}
	for _, t := range tags {
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return nil, newError(CodeInvalidParameterValue, "Tag keys starting with 'aws:' are reserved for internal use")
		}
	}
	var behavior *Behavior
	if v, ok := tagSet(tags).get(BehaviorTagKey); ok {
		b, berr := ParseBehavior(v)
		if berr != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid %s tag: %v", BehaviorTagKey, berr)
		}
		behavior = &b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Validate every id before changing anything: EC2 tags all or none.
	for _, id := range ids {
		var e *APIError
		switch {
		case strings.HasPrefix(id, "i-"):
			e = s.lookupInstancesLocked([]string{id})
		case strings.HasPrefix(id, "lt-"):
			_, e = s.findLaunchTemplateLocked(id, "")
		case strings.HasPrefix(id, "ami-"):
			if s.images[id] == nil {
				e = newError("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
			}
		default:
			e = newError("InvalidID", "The ID '%s' is not valid", id)
		}
		if e != nil {
			return nil, e
		}
	}
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "i-"):
			in := s.instances[id]
			in.tags = in.tags.set(tags...)
			if behavior != nil {
				in.behavior = in.baseBehavior.merge(*behavior)
			}
		case strings.HasPrefix(id, "lt-"):
			lt := s.launchTemplates[id]
			lt.tags = lt.tags.set(tags...)
		case strings.HasPrefix(id, "ami-"):
			img := s.images[id]
			img.Tags = tagSet(img.Tags).set(tags...)
		}
	}
	return &returnResponse{Return: true}, nil
}
