package ec2sim

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// profileName reads and validates InstanceProfileName (at most 128
// characters).
func profileName(p params) (string, *APIError) {
	return iamName(p, "InstanceProfileName", "instanceProfileName", reIAMProfileName, 128)
}

// roleName reads and validates RoleName (at most 64 characters).
func roleName(p params) (string, *APIError) {
	return iamName(p, "RoleName", "roleName", reIAMRoleName, 64)
}

// profileAndRole reads and validates InstanceProfileName and RoleName, the
// parameters of AddRoleToInstanceProfile and RemoveRoleFromInstanceProfile,
// answering the first one's error.
func profileAndRole(p params) (profile, role string, err *APIError) {
	if profile, err = profileName(p); err != nil {
		return "", "", err
	}
	if role, err = roleName(p); err != nil {
		return "", "", err
	}
	return profile, role, nil
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
	name, role, e := profileAndRole(req.p)
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
	name, role, e := profileAndRole(req.p)
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

// maxIAMListItems is the largest MaxItems of IAM's List* actions; the
// default is 100 (IAM API Reference, ListInstanceProfiles).
const (
	maxIAMListItems     = 1000
	defaultIAMListItems = 100
)

type listInstanceProfilesResult struct {
	InstanceProfiles []xmlIAMProfile `xml:"InstanceProfiles>member"`
	IsTruncated      bool            `xml:"IsTruncated"`
	Marker           string          `xml:"Marker,omitempty"`
}

// listInstanceProfiles answers ListInstanceProfiles: the profiles whose
// path starts with PathPrefix (default "/"), by name, MaxItems (1–1000,
// default 100) per page with IsTruncated and Marker. As in IAM, the
// listing leaves out the profiles' tags ("IAM resource-listing operations
// return a subset of the available attributes").
func (s *Simulator) listInstanceProfiles(req *request) (any, error) {
	prefix := req.p.str("PathPrefix")
	if prefix == "" {
		prefix = "/"
	}
	if len(prefix) > 512 || !strings.HasPrefix(prefix, "/") || strings.ContainsFunc(prefix, func(r rune) bool { return r < 0x21 || r > 0x7f }) {
		return nil, iamError("ValidationError", "1 validation error detected: Value '%s' at 'pathPrefix' failed to satisfy constraint: Member must satisfy regular expression pattern: \\u002F[\\u0021-\\u007F]* and have length at most 512", prefix)
	}
	size := defaultIAMListItems
	if v := req.p.str("MaxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxIAMListItems {
			return nil, iamError("ValidationError", "1 validation error detected: Value '%s' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and %d", v, maxIAMListItems)
		}
		size = n
	}
	offset := 0
	if m := req.p.str("Marker"); m != "" {
		off, ok := decodeToken(m)
		if !ok {
			return nil, iamError("ValidationError", "Invalid Marker: %s", m)
		}
		offset = off
	}
	st := s.iamState()
	st.mu.Lock()
	defer st.mu.Unlock()
	var matched []*iamProfile
	for _, name := range sortedKeys(st.profiles) {
		if p := st.profiles[name]; strings.HasPrefix(p.path, prefix) {
			matched = append(matched, p)
		}
	}
	lo, hi, next := paginate(len(matched), offset, size)
	out := &listInstanceProfilesResult{InstanceProfiles: []xmlIAMProfile{}, IsTruncated: next != "", Marker: next}
	for _, p := range matched[lo:hi] {
		x := s.profileXMLLocked(st, p)
		x.Tags = nil
		out.InstanceProfiles = append(out.InstanceProfiles, x)
	}
	return out, nil
}
