package ec2sim

import (
	"sort"
	"strings"
)

// Tag is an EC2 resource tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// tagSet keeps tags sorted by key with unique keys.
type tagSet []Tag

func (ts tagSet) get(k string) (string, bool) {
	for _, t := range ts {
		if t.Key == k {
			return t.Value, true
		}
	}
	return "", false
}

func (ts tagSet) set(tags ...Tag) tagSet {
	out := append(tagSet(nil), ts...)
	for _, t := range tags {
		replaced := false
		for i := range out {
			if out[i].Key == t.Key {
				out[i].Value = t.Value
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (ts tagSet) asMap() map[string]string {
	m := make(map[string]string, len(ts))
	for _, t := range ts {
		m[t.Key] = t.Value
	}
	return m
}

// filter is one Filter.N of a Describe* request: the resource matches when
// any of Values matches (EC2 ORs values and ANDs filters).
type filter struct {
	Name   string
	Values []string
}

func (p params) filters() ([]filter, *APIError) {
	var out []filter
	for _, it := range p.items("Filter") {
		name := it.str("Name")
		if name == "" {
			return nil, errMissingParameter("Filter.Name")
		}
		out = append(out, filter{Name: name, Values: it.list("Value")})
	}
	return out, nil
}

// fieldFunc returns the values of a filterable field of a resource, and false
// when the filter name is not supported for that resource type.
type fieldFunc[T any] func(r T, name string) ([]string, bool)

// matchFilters reports whether r matches every filter. Tag filters (tag:K,
// tag-key, tag-value) are answered from tags; everything else from field.
// An unsupported filter name is an InvalidParameterValue error, as in EC2.
func matchFilters[T any](r T, tags tagSet, fs []filter, field fieldFunc[T]) (bool, *APIError) {
	for _, f := range fs {
		var vals []string
		switch {
		case strings.HasPrefix(f.Name, "tag:"):
			if v, ok := tags.get(strings.TrimPrefix(f.Name, "tag:")); ok {
				vals = []string{v}
			}
		case f.Name == "tag-key":
			for _, t := range tags {
				vals = append(vals, t.Key)
			}
		case f.Name == "tag-value":
			for _, t := range tags {
				vals = append(vals, t.Value)
			}
		default:
			v, ok := field(r, f.Name)
			if !ok {
				return false, errInvalidFilter(f.Name)
			}
			vals = v
		}
		if !anyMatch(f.Values, vals) {
			return false, nil
		}
	}
	return true, nil
}

// parseFilters reads Filter.N and rejects names field does not support.
func parseFilters[T any](p params, zero T, field fieldFunc[T]) ([]filter, *APIError) {
	fs, err := p.filters()
	if err != nil {
		return nil, err
	}
	return fs, checkFilters(fs, zero, field)
}

// checkFilters rejects unsupported filter names up front (EC2 does, even
// when nothing would match): zero is a resource value the field function
// can be asked about.
func checkFilters[T any](fs []filter, zero T, field fieldFunc[T]) *APIError {
	for _, f := range fs {
		if strings.HasPrefix(f.Name, "tag:") || f.Name == "tag-key" || f.Name == "tag-value" {
			continue
		}
		if _, ok := field(zero, f.Name); !ok {
			return errInvalidFilter(f.Name)
		}
	}
	return nil
}

func anyMatch(patterns, vals []string) bool {
	for _, p := range patterns {
		for _, v := range vals {
			if wildcardMatch(p, v) {
				return true
			}
		}
	}
	return false
}

// wildcardMatch implements EC2 filter wildcards: '*' matches any run of
// characters, '?' exactly one; "\*" and "\?" are literals.
func wildcardMatch(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?\\") {
		return pattern == s
	}
	// Classic two-pointer glob matching with backtracking on '*'.
	p := []rune(pattern)
	r := []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(r) {
		switch {
		case pi < len(p) && p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == r[si]:
			pi += 2
			si++
		case pi < len(p) && (p[pi] == '?' || (p[pi] == r[si] && p[pi] != '*' && p[pi] != '\\')):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func one(s string) []string { return []string{s} }

// matching collects what a Describe call answers: the resources that pass
// its filters, in the order they were added, for answer to page.
type matching[T any] struct {
	fs    []filter
	field fieldFunc[T]
	all   []T
	err   *APIError
}

// add keeps r when it passes every filter (matchFilters; tags answer the
// tag filters). After a filter error it keeps nothing more, and answer
// returns that error.
func (m *matching[T]) add(r T, tags tagSet) {
	if m.err != nil {
		return
	}
	ok, err := matchFilters(r, tags, m.fs, m.field)
	if err != nil {
		m.err = err
		return
	}
	if ok {
		m.all = append(m.all, r)
	}
}

// answer returns m's first filter error, else resp of the page of m's
// resources that offset and size select (paginate) and the next page's
// token ("" on the last page).
func answer[T any](m *matching[T], offset, size int, resp func(page []T, next string) any) (any, error) {
	if m.err != nil {
		return nil, m.err
	}
	lo, hi, next := paginate(len(m.all), offset, size)
	return resp(m.all[lo:hi], next), nil
}
