package ec2sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file simulates the IAM instance-profile actions over the IAM Query
// protocol (Action=...&Version=2010-05-08, form-encoded; XML answers in the
// https://iam.amazonaws.com/doc/2010-05-08/ namespace; errors as
// <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>), as
// aws-sdk-go-v2/service/iam speaks it. Requests reach it on the same
// endpoint as EC2: serveAPI routes a form whose Version is 2010-05-08 here.
//
// Roles are not created through the API: a role exists when it is in
// Config.IAMRoles, was added with AddRole (or POST /_sim/iam/roles), or
// matches one of Config.IAMRolePatterns (default DefaultIAMRolePatterns,
// the node role names of Karpenter's getting-started guide and of the
// karpx examples), unless RemoveRole removed it. An instance profile holds
// at most one role ("IAM object quotas": InstanceSessionsPerInstanceProfile
// is 1). IAM documents no request rates; IAM actions are unthrottled unless
// ThrottleConfig.Categories[CategoryIAM] sets a bucket. Faults apply to them
// by action name like to EC2 actions (for example Code "AccessDenied" on
// "CreateInstanceProfile").

// iamAPIVersion is the IAM Query API version the SDK sends.
const iamAPIVersion = "2010-05-08"

// iamNamespace is the XML namespace of IAM answers.
const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// serviceIAM is the IAM Query protocol.
const serviceIAM service = "iam"

// CategoryIAM is the throttling category of the IAM actions. It has no
// bucket in DefaultThrottleConfig (IAM publishes no request rates), so IAM
// calls are never throttled unless ThrottleConfig.Categories sets one.
const CategoryIAM ThrottleCategory = "iam"

// DefaultIAMRolePatterns are the role-name patterns (path.Match syntax)
// that exist when Config.IAMRolePatterns is nil: "KarpenterNodeRole-*",
// the node role of Karpenter's getting-started guide
// (KarpenterNodeRole-${CLUSTER_NAME}), which every karpx example, the demo
// and the end-to-end tests use.
var DefaultIAMRolePatterns = []string{"KarpenterNodeRole-*"}

// Instance profile and role names: [\w+=,.@-], 1 to 128 (profiles) or 64
// (roles) characters; paths: "/" or "/.../" of printable ASCII, at most
// 512 characters. Source: IAM API Reference, CreateInstanceProfile and
// CreateRole parameters.
var (
	reIAMProfileName = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	reIAMRoleName    = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
	reIAMPath        = regexp.MustCompile(`^(/|/[\x21-\x7E]+/)$`)
)

// maxIAMTags is the most tags an IAM resource may carry (IAM object quotas).
const maxIAMTags = 50

// iamActions are the IAM actions the simulator answers; init adds them to
// the action index so faults and counters treat them like EC2's.
var iamActions = []actionSpec{
	{"CreateInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).createInstanceProfile},
	{"GetInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).getInstanceProfile},
	{"AddRoleToInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).addRoleToInstanceProfile},
	{"RemoveRoleFromInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).removeRoleFromInstanceProfile},
	{"DeleteInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).deleteInstanceProfile},
	{"TagInstanceProfile", serviceIAM, CategoryIAM, false, hooksDefault, (*Simulator).tagInstanceProfile},
}

func init() {
	for i := range iamActions {
		actionsByName[iamActions[i].name] = &iamActions[i]
	}
}

// IAMActions returns the names of the IAM actions the simulator answers.
func IAMActions() []string {
	out := make([]string, 0, len(iamActions))
	for _, a := range iamActions {
		out = append(out, a.name)
	}
	return out
}

// InstanceProfile is a snapshot of a simulated IAM instance profile.
type InstanceProfile struct {
	// Name is the instance profile name.
	Name string `json:"name"`
	// Path is the IAM path, "/" by default.
	Path string `json:"path"`
	// ARN is arn:aws:iam::<account>:instance-profile<path><name>.
	ARN string `json:"arn"`
	// Roles are the role names it holds (at most one).
	Roles []string `json:"roles"`
	// Tags are its tags.
	Tags map[string]string `json:"tags,omitempty"`
	// Created is when it was created.
	Created time.Time `json:"created"`
}

// iamState is the simulated IAM account. Guarded by mu, independent of
// Simulator.mu.
type iamState struct {
	mu       sync.Mutex
	patterns []string
	roles    map[string]time.Time // explicitly added role → creation time
	removed  map[string]bool      // roles removed although a pattern matches
	profiles map[string]*iamProfile
}

type iamProfile struct {
	name, path, id string
	created        time.Time
	roles          []string
	tags           tagSet
}

func newIAMState(cfg Config) *iamState {
	st := &iamState{patterns: cfg.IAMRolePatterns, roles: map[string]time.Time{}, removed: map[string]bool{},
		profiles: map[string]*iamProfile{}}
	if st.patterns == nil {
		st.patterns = DefaultIAMRolePatterns
	}
	for _, r := range cfg.IAMRoles {
		st.roles[r] = imageEpoch
	}
	return st
}

// roleExistsLocked reports whether role exists.
func (st *iamState) roleExistsLocked(role string) bool {
	if st.removed[role] {
		return false
	}
	if _, ok := st.roles[role]; ok {
		return true
	}
	for _, p := range st.patterns {
		if ok, _ := path.Match(p, role); ok {
			return true
		}
	}
	return false
}

// AddRole makes the IAM role name exist (as if created in the account). It
// returns an error when name is not a valid role name.
func (s *Simulator) AddRole(name string) error {
	if !reIAMRoleName.MatchString(name) {
		return fmt.Errorf("ec2sim: invalid IAM role name %q: 1 to 64 characters of [A-Za-z0-9_+=,.@-]", name)
	}
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.removed, name)
	st.roles[name] = s.clock.Now()
	return nil
}

// RemoveRole makes the IAM role name not exist, even when it matches
// Config.IAMRolePatterns. Instance profiles keep it (as IAM keeps a
// deleted role's name in profiles until removed).
func (s *Simulator) RemoveRole(name string) {
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.roles, name)
	st.removed[name] = true
}

// RoleExists reports whether the IAM role name exists.
func (s *Simulator) RoleExists(name string) bool {
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.roleExistsLocked(name)
}

// InstanceProfiles returns every instance profile, sorted by name.
func (s *Simulator) InstanceProfiles() []InstanceProfile {
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]InstanceProfile, 0, len(st.profiles))
	for _, name := range sortedKeys(st.profiles) {
		p := st.profiles[name]
		out = append(out, InstanceProfile{Name: p.name, Path: p.path, ARN: s.profileARN(p), Roles: append([]string{}, p.roles...),
			Tags: p.tags.asMap(), Created: p.created})
	}
	return out
}

// iamState returns the IAM state, created on first use.
func (s *Simulator) iamState() *iamState {
	s.iamOnce.Do(func() { s.iam = newIAMState(s.cfg) })
	return s.iam
}

func (s *Simulator) profileARN(p *iamProfile) string {
	return "arn:aws:iam::" + s.cfg.AccountID + ":instance-profile" + p.path + p.name
}

// iamID returns an IAM unique id: prefix ("AIPA" profiles, "AROA" roles)
// and 17 upper-case characters derived from seed.
func iamID(prefix, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return prefix + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
}

// serveIAM answers one IAM Query call; r.Form is parsed.
func (s *Simulator) serveIAM(w http.ResponseWriter, r *http.Request, reqID string) {
	s.responseDelay()
	p := newParams(r.Form)
	name := p.str("Action")
	spec := lookupAction(name)
	if spec == nil || spec.service != serviceIAM {
		e := iamError("InvalidAction", "Could not find operation %s for version %s", name, iamAPIVersion)
		s.metrics.observe(serviceIAM, "Unknown", 0, e, false)
		writeIAMError(w, reqID, e)
		return
	}
	body, apiErr := s.dispatch(&request{ctx: r.Context(), spec: spec, p: p})
	if apiErr != nil {
		writeIAMError(w, reqID, apiErr)
		return
	}
	if err := writeIAMXML(w, spec.name, reqID, body); err != nil {
		s.log.Error(err, "Writing answer", "action", spec.name)
	}
}

// iamStatus is the HTTP status IAM answers code with (IAM API Reference,
// "Common errors" and each action's errors).
func iamStatus(code string) int {
	switch code {
	case "NoSuchEntity":
		return http.StatusNotFound
	case "EntityAlreadyExists", "LimitExceeded", "DeleteConflict", "ConcurrentModification":
		return http.StatusConflict
	case "AccessDenied", "AccessDeniedException":
		return http.StatusForbidden
	case "ServiceFailure", CodeInternalError:
		return http.StatusInternalServerError
	case "ServiceUnavailable", CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func iamError(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), HTTPStatus: iamStatus(code)}
}

type iamErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Error     iamErr   `xml:"Error"`
	RequestID string   `xml:"RequestId"`
}

type iamErr struct {
	Type    string `xml:"Type"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// writeIAMError writes IAM's error document. The simulator's shared
// pipeline answers throttling and internal errors with EC2's codes; they
// are renamed to IAM's (Throttling, ServiceFailure).
func writeIAMError(w http.ResponseWriter, reqID string, e *APIError) {
	code, msg := e.Code, e.Message
	switch code {
	case CodeRequestLimitExceeded:
		code, msg = "Throttling", "Rate exceeded"
	case CodeInternalError:
		code = "ServiceFailure"
	}
	typ := "Sender"
	status := iamStatus(code)
	if e.HTTPStatus != 0 && e.HTTPStatus != defaultStatus(e.Code) && e.HTTPStatus != iamStatus(e.Code) {
		status = e.HTTPStatus // a fault rule's explicit status
	}
	if status >= 500 {
		typ = "Receiver"
	}
	body, _ := xml.Marshal(iamErrorResponse{Xmlns: iamNamespace, Error: iamErr{Type: typ, Code: code, Message: msg}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type iamResponseMetadata struct {
	RequestID string `xml:"RequestId"`
}

// writeIAMXML writes <ActionResponse xmlns><ActionResult>body</ActionResult>
// <ResponseMetadata><RequestId/></ResponseMetadata></ActionResponse>; a nil
// body (actions without output) omits the result element.
func writeIAMXML(w http.ResponseWriter, action, reqID string, body any) error {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNamespace}}}
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	if _, empty := body.(iamNoOutput); !empty && body != nil {
		if err := enc.EncodeElement(body, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			return err
		}
	}
	if err := enc.EncodeElement(iamResponseMetadata{RequestID: reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}); err != nil {
		return err
	}
	if err := enc.EncodeToken(start.End()); err != nil {
		return err
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf.Bytes())
	return err
}

// iamNoOutput is the answer of actions that return only metadata.
type iamNoOutput struct{}

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlIAMRole struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	Arn                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type xmlIAMRoles struct {
	Members []xmlIAMRole `xml:"member"`
}

type xmlIAMProfile struct {
	Path                string      `xml:"Path"`
	InstanceProfileName string      `xml:"InstanceProfileName"`
	InstanceProfileID   string      `xml:"InstanceProfileId"`
	Arn                 string      `xml:"Arn"`
	CreateDate          string      `xml:"CreateDate"`
	Roles               xmlIAMRoles `xml:"Roles"`
	Tags                []xmlIAMTag `xml:"Tags>member,omitempty"`
}

type instanceProfileResult struct {
	InstanceProfile xmlIAMProfile `xml:"InstanceProfile"`
}

// ec2AssumeRolePolicy is the trust policy of a node role (EC2 may assume
// it), URL-encoded as IAM returns policy documents.
var ec2AssumeRolePolicy = url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)

// profileXMLLocked renders p; st.mu is held.
func (s *Simulator) profileXMLLocked(st *iamState, p *iamProfile) xmlIAMProfile {
	out := xmlIAMProfile{Path: p.path, InstanceProfileName: p.name, InstanceProfileID: p.id, Arn: s.profileARN(p), CreateDate: ec2Time(p.created)}
	for _, r := range p.roles {
		created, ok := st.roles[r]
		if !ok {
			created = imageEpoch
		}
		out.Roles.Members = append(out.Roles.Members, xmlIAMRole{Path: "/", RoleName: r, RoleID: iamID("AROA", s.cfg.AccountID+"/"+r),
			Arn: "arn:aws:iam::" + s.cfg.AccountID + ":role/" + r, CreateDate: ec2Time(created), AssumeRolePolicyDocument: ec2AssumeRolePolicy})
	}
	for _, t := range p.tags {
		out.Tags = append(out.Tags, xmlIAMTag(t))
	}
	return out
}

// iamTags reads Tags.member.N.{Key,Value}.
func iamTags(p params) ([]Tag, *APIError) {
	var out []Tag
	for _, it := range p.items("Tags.member") {
		k := it.str("Key")
		if k == "" || len(k) > 128 || len(it.str("Value")) > 256 {
			return nil, iamError("ValidationError", "1 validation error detected: Value at 'tags' failed to satisfy constraint: tag keys must be 1 to 128 characters and values at most 256")
		}
		out = append(out, Tag{Key: k, Value: it.str("Value")})
	}
	return out, nil
}

// profileName reads and validates InstanceProfileName (at most 128
// characters).
func profileName(p params) (string, *APIError) {
	return iamName(p, "InstanceProfileName", "instanceProfileName", reIAMProfileName, 128)
}

// roleName reads and validates RoleName (at most 64 characters).
func roleName(p params) (string, *APIError) {
	return iamName(p, "RoleName", "roleName", reIAMRoleName, 64)
}

// iamName reads the name parameter param and validates it against re (IAM's
// [\w+=,.@-]+ of at most maxLen characters), answering IAM's
// ValidationError for field when it is missing or does not match.
func iamName(p params, param, field string, re *regexp.Regexp, maxLen int) (string, *APIError) {
	name := p.str(param)
	switch {
	case name == "":
		return "", iamError("ValidationError", "1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", field)
	case !re.MatchString(name):
		return "", iamError("ValidationError", "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length at most %d", name, field, maxLen)
	}
	return name, nil
}

func errNoSuchProfile(name string) *APIError {
	return iamError("NoSuchEntity", "Instance Profile %s cannot be found.", name)
}

// onProfile runs fn on the instance profile called name with the IAM state
// locked, and answers NoSuchEntity when there is none.
func (s *Simulator) onProfile(name string, fn func(st *iamState, prof *iamProfile) (any, error)) (any, error) {
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	prof, ok := st.profiles[name]
	if !ok {
		return nil, errNoSuchProfile(name)
	}
	return fn(st, prof)
}

func (s *Simulator) createInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	p := req.p.str("Path")
	if p == "" {
		p = "/"
	}
	if len(p) > 512 || !reIAMPath.MatchString(p) {
		return nil, iamError("ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	tags, e := iamTags(req.p)
	if e != nil {
		return nil, e
	}
	if len(tags) > maxIAMTags {
		return nil, iamError("LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: %d", maxIAMTags)
	}
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, dup := st.profiles[name]; dup {
		return nil, iamError("EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	prof := &iamProfile{name: name, path: p, created: req.now, tags: tagSet(nil).set(tags...),
		id: iamID("AIPA", s.cfg.AccountID+"/"+name+"/"+req.now.String())}
	st.profiles[name] = prof
	s.log.V(1).Info("Created instance profile", "name", name, "path", p)
	return &instanceProfileResult{InstanceProfile: s.profileXMLLocked(st, prof)}, nil
}

func (s *Simulator) getInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	return s.onProfile(name, func(st *iamState, prof *iamProfile) (any, error) {
		return &instanceProfileResult{InstanceProfile: s.profileXMLLocked(st, prof)}, nil
	})
}

func (s *Simulator) addRoleToInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	role, e := roleName(req.p)
	if e != nil {
		return nil, e
	}
	return s.onProfile(name, func(st *iamState, prof *iamProfile) (any, error) {
		if !st.roleExistsLocked(role) {
			return nil, iamError("NoSuchEntity", "The role with name %s cannot be found.", role)
		}
		if len(prof.roles) > 0 {
			return nil, iamError("LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
		}
		prof.roles = []string{role}
		s.log.V(1).Info("Added role to instance profile", "name", name, "role", role)
		return iamNoOutput{}, nil
	})
}

func (s *Simulator) removeRoleFromInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	role, e := roleName(req.p)
	if e != nil {
		return nil, e
	}
	return s.onProfile(name, func(st *iamState, prof *iamProfile) (any, error) {
		i := slices.Index(prof.roles, role)
		if i < 0 {
			return nil, iamError("NoSuchEntity", "The role with name %s cannot be found.", role)
		}
		prof.roles = append(prof.roles[:i], prof.roles[i+1:]...)
		return iamNoOutput{}, nil
	})
}

func (s *Simulator) deleteInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	return s.onProfile(name, func(st *iamState, prof *iamProfile) (any, error) {
		if len(prof.roles) > 0 {
			return nil, iamError("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
		}
		delete(st.profiles, name)
		s.log.V(1).Info("Deleted instance profile", "name", name)
		return iamNoOutput{}, nil
	})
}

func (s *Simulator) tagInstanceProfile(req *request) (any, error) {
	name, e := profileName(req.p)
	if e != nil {
		return nil, e
	}
	tags, e := iamTags(req.p)
	if e != nil {
		return nil, e
	}
	if len(tags) == 0 {
		return nil, iamError("ValidationError", "1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null")
	}
	return s.onProfile(name, func(st *iamState, prof *iamProfile) (any, error) {
		merged := prof.tags.set(tags...)
		if len(merged) > maxIAMTags {
			return nil, iamError("LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: %d", maxIAMTags)
		}
		prof.tags = merged
		return iamNoOutput{}, nil
	})
}

// registerIAMAdmin serves the IAM admin endpoints:
//
//	GET    /_sim/iam/roles               {"roles": [...], "patterns": [...]}
//	POST   /_sim/iam/roles               {"name": "<role>"}: the role exists
//	DELETE /_sim/iam/roles?name=<role>   the role no longer exists
//	GET    /_sim/iam/instance-profiles   [InstanceProfile...]
func (s *Simulator) registerIAMAdmin(mux *http.ServeMux) {
	mux.HandleFunc("/_sim/iam/roles", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost:
			var in struct {
				Name string `json:"name"`
			}
			if !readJSON(w, r, &in) {
				return
			}
			if err := s.AddRole(in.Name); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
		case http.MethodDelete:
			name := r.URL.Query().Get("name")
			if name == "" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter name is required"})
				return
			}
			s.RemoveRole(name)
		default:
			methodNotAllowed(w)
			return
		}
		st := s.iamState()
		st.mu.Lock()
		out := map[string][]string{"roles": sortedKeys(st.roles), "patterns": append([]string{}, st.patterns...), "removed": sortedKeys(st.removed)}
		st.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("/_sim/iam/instance-profiles", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			methodNotAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, s.InstanceProfiles())
	})
}
