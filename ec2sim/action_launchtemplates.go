package ec2sim

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
)

// CreateLaunchTemplate, DescribeLaunchTemplates and DeleteLaunchTemplate.
// Only version 1 of a template exists; "$Latest" and "$Default" name it.

var reLTName = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

type xmlLaunchTemplate struct {
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int64    `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64    `xml:"latestVersionNumber"`
	Tags                 []xmlTag `xml:"tagSet>item,omitempty"`
}

func (s *Simulator) ltXML(lt *launchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{LaunchTemplateID: lt.id, LaunchTemplateName: lt.name, CreateTime: ec2Time(lt.created),
		CreatedBy: "arn:aws:iam::" + s.cfg.AccountID + ":root", DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: xmlTags(lt.tags)}
}

type launchTemplateResponse struct {
	respMeta
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

func (s *Simulator) createLaunchTemplate(req *request) (any, error) {
	p := req.p
	name := p.str("LaunchTemplateName")
	if name == "" {
		return nil, errMissingParameter("LaunchTemplateName")
	}
	if !reLTName.MatchString(name) {
		return nil, newError("InvalidLaunchTemplateName.MalformedException",
			"A launch template name must be 3 to 128 characters long and may only contain letters, digits and the characters ( ) . - / _")
	}
	if !p.hasPrefix("LaunchTemplateData") {
		return nil, errMissingParameter("LaunchTemplateData")
	}
	data := p.child("LaunchTemplateData")
	lt := &launchTemplate{name: name, created: req.now, imageID: data.str("ImageId"), instanceType: data.str("InstanceType")}
	if ud := data.str("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, newError("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		lt.userData = string(raw)
		b, berr := behaviorFromUserData(lt.userData)
		if berr != nil {
			return nil, newError(CodeInvalidParameterValue, "Invalid karpx-sim marker in user data: %v", berr)
		}
		lt.behavior = b
	}
	lt.iamInstanceProfile = data.str("IamInstanceProfile.Name")
	if arn := data.str("IamInstanceProfile.Arn"); lt.iamInstanceProfile == "" && arn != "" {
		lt.iamInstanceProfile = arn[strings.LastIndexByte(arn, '/')+1:]
	}
	lt.sgIDs = data.list("SecurityGroupId")
	for _, ni := range data.items("NetworkInterface") {
		lt.sgIDs = append(lt.sgIDs, ni.list("SecurityGroupId")...)
	}
	for _, id := range lt.sgIDs {
		if !reSGID.MatchString(id) {
			return nil, errMalformedID("InvalidGroupId.Malformed", id, "sg-")
		}
	}
	lr, lrErr := parseLaunchReservation(data)
	if lrErr != nil {
		return nil, lrErr
	}
	lt.reservation = lr
	if lt.imageID != "" && !reAMIID.MatchString(lt.imageID) {
		return nil, errMalformedID("InvalidAMIID.Malformed", lt.imageID, "ami-")
	}
	dataTags, err := data.tagSpecs("TagSpecification", "instance", "volume", "network-interface", "spot-instances-request")
	if err != nil {
		return nil, err
	}
	lt.instanceTags = tagSet(nil).set(dataTags["instance"]...)
	ltTags, err := p.tagSpecs("TagSpecification", "launch-template")
	if err != nil {
		return nil, err
	}
	lt.tags = tagSet(nil).set(ltTags["launch-template"]...)

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.ltByName[name]; dup {
		return nil, newError("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	lt.id = s.ids.next("lt-")
	s.launchTemplates[lt.id] = lt
	s.ltByName[name] = lt.id
	s.log.V(1).Info("Created launch template", "id", lt.id, "name", name, "imageID", lt.imageID, "behavior", lt.behavior.String())
	return &launchTemplateResponse{LaunchTemplate: s.ltXML(lt)}, nil
}

// findLaunchTemplateLocked resolves a template by id or name with EC2's
// error codes.
func (s *Simulator) findLaunchTemplateLocked(id, name string) (*launchTemplate, *APIError) {
	switch {
	case id != "":
		if !reLTID.MatchString(id) {
			return nil, newError("InvalidLaunchTemplateId.Malformed",
				"The specified ID for the launch template, %s, is not valid. A launch template ID is lt- followed by 17 hexadecimal characters.", id)
		}
		lt := s.launchTemplates[id]
		if lt == nil {
			return nil, newError("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		return lt, nil
	case name != "":
		ltID, ok := s.ltByName[name]
		if !ok {
			return nil, newError("InvalidLaunchTemplateName.NotFoundException",
				"The specified launch template, with template name %s, does not exist.", name)
		}
		return s.launchTemplates[ltID], nil
	}
	return nil, errMissingParameter("LaunchTemplateId or LaunchTemplateName")
}

type describeLaunchTemplatesResponse struct {
	respMeta
	LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

func (s *Simulator) describeLaunchTemplates(req *request) (any, error) {
	fs, err := parseFilters(req.p, xmlLaunchTemplate{}, launchTemplateField)
	if err != nil {
		return nil, err
	}
	ids := req.p.list("LaunchTemplateId")
	names := req.p.list("LaunchTemplateName")
	offset, size, perr := req.p.pageRange(1, 200, 1<<30)
	if perr != nil {
		return nil, perr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, e := s.findLaunchTemplateLocked(id, ""); e != nil {
			return nil, e
		}
	}
	for _, n := range names {
		if _, ok := s.ltByName[n]; !ok {
			return nil, newError("InvalidLaunchTemplateName.NotFoundException",
				"At least one of the launch templates specified in the request does not exist.")
		}
	}
	m := matching[xmlLaunchTemplate]{fs: fs, field: launchTemplateField}
	for _, key := range sortedKeys(s.ltByName) {
		lt := s.launchTemplates[s.ltByName[key]]
		if (len(ids) > 0 || len(names) > 0) && !contains(ids, lt.id) && !contains(names, lt.name) {
			continue
		}
		x := s.ltXML(lt)
		m.add(x, lt.tags)
	}
	return answer(&m, offset, size, func(page []xmlLaunchTemplate, next string) any {
		return &describeLaunchTemplatesResponse{LaunchTemplates: page, NextToken: next}
	})
}

func (s *Simulator) deleteLaunchTemplate(req *request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, e := s.findLaunchTemplateLocked(req.p.str("LaunchTemplateId"), req.p.str("LaunchTemplateName"))
	if e != nil {
		return nil, e
	}
	delete(s.launchTemplates, lt.id)
	delete(s.ltByName, lt.name)
	s.log.V(1).Info("Deleted launch template", "id", lt.id, "name", lt.name)
	return &launchTemplateResponse{LaunchTemplate: s.ltXML(lt)}, nil
}

func launchTemplateField(x xmlLaunchTemplate, name string) ([]string, bool) {
	switch name {
	case "launch-template-name":
		return one(x.LaunchTemplateName), true
	case "create-time":
		return one(x.CreateTime), true
	case "launch-template-id":
		return one(x.LaunchTemplateID), true
	case "default-version":
		return one(strconv.FormatInt(x.DefaultVersionNumber, 10)), true
	}
	return nil, false
}
