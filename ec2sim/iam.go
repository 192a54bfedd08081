package ec2sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"regexp"
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
// ThrottleConfig.Categories[awsquota.IAM] sets a bucket. Faults apply to them
// by action name like to EC2 actions (for example Code "AccessDenied" on
// "CreateInstanceProfile").

// iamAPIVersion is the IAM Query API version the SDK sends.
const iamAPIVersion = "2010-05-08"

// iamNamespace is the XML namespace of IAM answers.
const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

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

// IAMActions returns the names of the IAM actions the simulator answers
// (the iam rows of unbucketedTable in actions.go).
func IAMActions() []string {
	var out []string
	for _, a := range unbucketedTable {
		if a.service == serviceIAM {
			out = append(out, a.name)
		}
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
