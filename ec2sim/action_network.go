package ec2sim

import (
	"strconv"
	"time"
)

// DescribeAvailabilityZones, DescribeSubnets and DescribeSecurityGroups.

type xmlAZ struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

type describeAZsResponse struct {
	respMeta
	Zones []xmlAZ `xml:"availabilityZoneInfo>item"`
}

func (s *Simulator) describeAvailabilityZones(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlAZ{}, azField)
	if err != nil {
		return nil, err
	}
	names := req.p.list("ZoneName")
	ids := req.p.list("ZoneId")
	for _, n := range names {
		if !contains(s.cfg.Zones, n) {
			return nil, newError(CodeInvalidParameterValue, "Invalid availability zone: [%s]", n)
		}
	}
	out := &describeAZsResponse{}
	for _, z := range s.cfg.Zones {
		az := xmlAZ{ZoneName: z, ZoneID: zoneID(s.cfg.Region, z), ZoneState: "available", RegionName: s.cfg.Region,
			GroupName: s.cfg.Region + "-zg-1", NetworkBorderGroup: s.cfg.Region, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone"}
		if (len(names) > 0 && !contains(names, z)) || (len(ids) > 0 && !contains(ids, az.ZoneID)) {
			continue
		}
		ok, ferr := matchFilters(az, nil, fs, azField)
		if ferr != nil {
			return nil, ferr
		}
		if ok {
			out.Zones = append(out.Zones, az)
		}
	}
	return out, nil
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	respMeta
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (s *Simulator) describeSubnets(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlSubnet{}, subnetField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("SubnetId")
	for _, id := range ids {
		if !reSubnetID.MatchString(id) {
			return nil, errMalformedID("InvalidSubnetID.Malformed", id, "subnet-")
		}
	}
	offset, size, perr := req.p.pageRange(5, 1000, 1000)
	if perr != nil {
		return nil, perr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := s.usedAddressesLocked(req.now)
	var missing []string
	for _, id := range ids {
		if s.subnetLocked(id) == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, newError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", quoteList(missing))
	}
	m := matching[xmlSubnet]{fs: fs, field: subnetField}
	for _, sn := range s.subnets {
		if len(ids) > 0 && !contains(ids, sn.ID) {
			continue
		}
		x := xmlSubnet{SubnetID: sn.ID, SubnetArn: "arn:aws:ec2:" + s.cfg.Region + ":" + s.cfg.AccountID + ":subnet/" + sn.ID,
			State: "available", VpcID: sn.VPCID, OwnerID: s.cfg.AccountID, CidrBlock: sn.CIDR,
			AvailableIPAddressCount: sn.size - 5 - used[sn.ID], AvailabilityZone: sn.Zone,
			AvailabilityZoneID: zoneID(s.cfg.Region, sn.Zone), Tags: xmlTags(sn.Tags)}
		m.add(x, tagSet(sn.Tags))
	}
	return answer(&m, offset, size, func(page []xmlSubnet, next string) any {
		return &describeSubnetsResponse{Subnets: page, NextToken: next}
	})
}

func (s *Simulator) subnetLocked(id string) *subnetState {
	for _, sn := range s.subnets {
		if sn.ID == id {
			return sn
		}
	}
	return nil
}

// usedAddressesLocked counts the addresses held by instances not yet
// terminated, per subnet.
func (s *Simulator) usedAddressesLocked(now time.Time) map[string]int {
	used := map[string]int{}
	for _, in := range s.instances {
		if in.state(now, &s.cfg) != StateTerminated {
			used[in.subnetID]++
		}
	}
	return used
}

type xmlSG struct {
	OwnerID          string   `xml:"ownerId"`
	GroupID          string   `xml:"groupId"`
	GroupName        string   `xml:"groupName"`
	GroupDescription string   `xml:"groupDescription"`
	VpcID            string   `xml:"vpcId"`
	SecurityGroupArn string   `xml:"securityGroupArn"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type describeSGsResponse struct {
	respMeta
	Groups    []xmlSG `xml:"securityGroupInfo>item"`
	NextToken string  `xml:"nextToken,omitempty"`
}

func (s *Simulator) describeSecurityGroups(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlSG{}, sgField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("GroupId")
	names := req.p.list("GroupName")
	for _, id := range ids {
		if !reSGID.MatchString(id) {
			return nil, errMalformedID("InvalidGroupId.Malformed", id, "sg-")
		}
	}
	offset, size, perr := req.p.pageRange(5, 1000, 1000)
	if perr != nil {
		return nil, perr
	}
	if (len(ids) > 0 || len(names) > 0) && req.p.has("MaxResults") {
		return nil, newError(CodeInvalidParameterCombination, "The parameter groupIds cannot be used with the parameter maxResults")
	}
	known := func(match func(SecurityGroup) bool) bool {
		for _, g := range s.securityGroups {
			if match(g) {
				return true
			}
		}
		return false
	}
	for _, id := range ids {
		if !known(func(g SecurityGroup) bool { return g.ID == id }) {
			return nil, newError("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range names {
		if !known(func(g SecurityGroup) bool { return g.Name == n }) {
			return nil, newError("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC", n)
		}
	}
	m := matching[xmlSG]{fs: fs, field: sgField}
	for _, g := range s.securityGroups {
		if (len(ids) > 0 && !contains(ids, g.ID)) || (len(names) > 0 && !contains(names, g.Name)) {
			continue
		}
		x := xmlSG{OwnerID: s.cfg.AccountID, GroupID: g.ID, GroupName: g.Name, GroupDescription: g.Description, VpcID: g.VPCID,
			SecurityGroupArn: "arn:aws:ec2:" + s.cfg.Region + ":" + s.cfg.AccountID + ":security-group/" + g.ID, Tags: xmlTags(g.Tags)}
		m.add(x, tagSet(g.Tags))
	}
	return answer(&m, offset, size, func(page []xmlSG, next string) any { return &describeSGsResponse{Groups: page, NextToken: next} })
}

func azField(a xmlAZ, name string) ([]string, bool) {
	switch name {
	case "zone-name":
		return one(a.ZoneName), true
	case "zone-id":
		return one(a.ZoneID), true
	case "state":
		return one(a.ZoneState), true
	case "region-name":
		return one(a.RegionName), true
	case "zone-type":
		return one(a.ZoneType), true
	case "group-name":
		return one(a.GroupName), true
	case "opt-in-status":
		return one(a.OptInStatus), true
	}
	return nil, false
}

func subnetField(x xmlSubnet, name string) ([]string, bool) {
	switch name {
	case "subnet-id":
		return one(x.SubnetID), true
	case "vpc-id":
		return one(x.VpcID), true
	case "availability-zone":
		return one(x.AvailabilityZone), true
	case "availability-zone-id":
		return one(x.AvailabilityZoneID), true
	case "cidr-block", "cidr", "cidrBlock":
		return one(x.CidrBlock), true
	case "state":
		return one(x.State), true
	case "owner-id":
		return one(x.OwnerID), true
	case "default-for-az":
		return one(strconv.FormatBool(x.DefaultForAz)), true
	case "available-ip-address-count":
		return one(strconv.Itoa(x.AvailableIPAddressCount)), true
	}
	return nil, false
}

func sgField(x xmlSG, name string) ([]string, bool) {
	switch name {
	case "group-id":
		return one(x.GroupID), true
	case "group-name":
		return one(x.GroupName), true
	case "vpc-id":
		return one(x.VpcID), true
	case "description":
		return one(x.GroupDescription), true
	case "owner-id":
		return one(x.OwnerID), true
	}
	return nil, false
}
