package ec2sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

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
