package ec2sim

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// This file holds the EC2 Query wire protocol: decoding of form-encoded
// requests (Action=...&Version=2016-11-15&Foo.1.Bar=...) and encoding of XML
// answers and errors, as aws-sdk-go-v2's ec2query protocol expects them.

// ec2Namespace is the XML namespace of every EC2 answer of API version
// 2016-11-15, the only version the SDK speaks.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// ec2TimeFormat is how EC2 renders timestamps (ISO 8601, milliseconds, UTC).
const ec2TimeFormat = "2006-01-02T15:04:05.000Z"

func ec2Time(t time.Time) string { return t.UTC().Format(ec2TimeFormat) }

// params is a view of a decoded query request below a key prefix, so that
// nested structures (LaunchTemplateConfigs.1.Overrides.2.InstanceType) read
// like flat ones.
type params struct {
	values url.Values
	prefix string
}

func newParams(v url.Values) params { return params{values: v} }

// str returns the value of key, or "".
func (p params) str(key string) string { return p.values.Get(p.prefix + key) }

// has reports whether key was sent.
func (p params) has(key string) bool {
	_, ok := p.values[p.prefix+key]
	return ok
}

// child returns the view below key, e.g. p.child("LaunchTemplateSpecification").
func (p params) child(key string) params {
	return params{values: p.values, prefix: p.prefix + key + "."}
}

// hasPrefix reports whether any key below name was sent.
func (p params) hasPrefix(name string) bool {
	full := p.prefix + name + "."
	for k := range p.values {
		if strings.HasPrefix(k, full) {
			return true
		}
	}
	return false
}

// indexes returns, in ascending order, the list indexes N sent as name.N or
// name.N.<anything>.
func (p params) indexes(name string) []int {
	full := p.prefix + name + "."
	seen := map[int]bool{}
	for k := range p.values {
		if !strings.HasPrefix(k, full) {
			continue
		}
		rest := k[len(full):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		if n, err := strconv.Atoi(rest); err == nil && n > 0 {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// items returns the sub-views name.1, name.2, ... of a list of structures.
func (p params) items(name string) []params {
	idx := p.indexes(name)
	out := make([]params, 0, len(idx))
	for _, n := range idx {
		out = append(out, p.child(name+"."+strconv.Itoa(n)))
	}
	return out
}

// list returns the scalar list name.1, name.2, ... in index order.
func (p params) list(name string) []string {
	idx := p.indexes(name)
	out := make([]string, 0, len(idx))
	for _, n := range idx {
		if v, ok := p.values[p.prefix+name+"."+strconv.Itoa(n)]; ok && len(v) > 0 {
			out = append(out, v[0])
		}
	}
	return out
}

// boolean parses an optional boolean; absent is false.
func (p params) boolean(key string) (bool, *APIError) {
	v := p.str(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errInvalidValue(v, key)
	}
	return b, nil
}

// integer parses an optional integer; ok is false when absent.
func (p params) integer(key string) (n int, ok bool, apiErr *APIError) {
	v := p.str(key)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, errInvalidValue(v, key)
	}
	return n, true, nil
}

// tags reads a Tag.N.Key / Tag.N.Value list.
func (p params) tags(name string) ([]Tag, *APIError) {
	var out []Tag
	for _, it := range p.items(name) {
		k := it.str("Key")
		if k == "" {
			return nil, errMissingParameter(name + ".Key")
		}
		out = append(out, Tag{Key: k, Value: it.str("Value")})
	}
	return out, nil
}

// tagSpecs reads TagSpecification.N.{ResourceType,Tag.M.*} and returns the
// tags per resource type.
func (p params) tagSpecs(name string, allowed ...string) (map[string][]Tag, *APIError) {
	out := map[string][]Tag{}
	for _, it := range p.items(name) {
		rt := it.str("ResourceType")
		if rt == "" {
			return nil, errMissingParameter(name + ".ResourceType")
		}
		ok := len(allowed) == 0
		for _, a := range allowed {
			ok = ok || a == rt
		}
		if !ok {
			return nil, newError(CodeInvalidParameterValue, "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		tags, err := it.tags("Tag")
		if err != nil {
			return nil, err
		}
		out[rt] = append(out[rt], tags...)
	}
	return out, nil
}

// pageRange validates MaxResults within [lo, hi] (def when absent) and
// decodes NextToken into an offset.
func (p params) pageRange(lo, hi, def int) (offset, size int, apiErr *APIError) {
	size = def
	if v := p.str("MaxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, 0, errMaxResults(v, lo, hi)
		}
		size = n
	}
	if tok := p.str("NextToken"); tok != "" {
		off, ok := decodeToken(tok)
		if !ok {
			return 0, 0, newError(CodeInvalidPaginationToken, "Invalid pagination token: %s", tok)
		}
		offset = off
	}
	return offset, size, nil
}

// Page tokens are opaque to clients; they encode the offset of the next item.
const tokenPrefix = "ec2sim:"

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.Itoa(offset)))
}

func decodeToken(tok string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), tokenPrefix))
	return n, err == nil && n >= 0
}

// paginate returns the window [offset, offset+size) of n items and the token
// of the next page ("" when this is the last).
func paginate(n, offset, size int) (lo, hi int, next string) {
	lo = min(offset, n)
	hi = min(lo+size, n)
	if hi < n {
		next = encodeToken(hi)
	}
	return lo, hi, next
}

// newRequestID returns a random UUID (version 4), the shape of EC2 request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// respMeta is embedded first in every answer body; it carries <requestId>.
type respMeta struct {
	RequestID string `xml:"requestId"`
}

func (m *respMeta) setRequestID(id string) { m.RequestID = id }

type requestIDSetter interface{ setRequestID(string) }

// writeXML encodes body as <ActionResponse xmlns="...">...</ActionResponse>.
func writeXML(w http.ResponseWriter, action, requestID string, body any) error {
	if s, ok := body.(requestIDSetter); ok {
		s.setRequestID(requestID)
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{
		Name: xml.Name{Local: action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}},
	}
	if err := enc.EncodeElement(body, start); err != nil {
		return err
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("x-amzn-RequestId", requestID)
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf.Bytes())
	return err
}

// errorResponse is EC2's error document:
// <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>.
type errorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []xmlErr `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

type xmlErr struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeXMLError(w http.ResponseWriter, requestID string, e *APIError) {
	body, _ := xml.Marshal(errorResponse{Errors: []xmlErr{{Code: e.Code, Message: e.Message}}, RequestID: requestID})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("x-amzn-RequestId", requestID)
	status := e.HTTPStatus
	if status == 0 {
		status = defaultStatus(e.Code)
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

// xmlTag is the <item><key/><value/></item> shape of tagSet.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xmlTags(tags []Tag) []xmlTag {
	out := make([]xmlTag, 0, len(tags))
	for _, t := range tags {
		out = append(out, xmlTag(t))
	}
	return out
}
