package ec2sim

import (
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This file holds the checks EC2 and SSM apply to a request before any
// action sees it, so that the simulator refuses what AWS refuses instead of
// guessing: the query string's syntax, the API version, repeated
// parameters, list indexes. Sources: "Common Errors" of the Amazon EC2 API
// Reference (MalformedQueryString, HTTP 404; InvalidQueryParameter,
// MissingParameter, InvalidParameterValue, HTTP 400), "Query requests for
// Amazon EC2" (list parameters are Name.N, N counted from 1) and "Error
// codes for the Amazon EC2 API" (UnknownParameter).

// apiVersion is the EC2 API version the simulator speaks, the one
// aws-sdk-go-v2 sends.
const apiVersion = "2016-11-15"

// maxListIndex is the largest list index (Name.N) the simulator accepts:
// EC2's largest documented lists are 1,000 items (TerminateInstances'
// instance ids, DescribeInstances' MaxResults), and a larger N can only be a
// malformed or hostile request.
const maxListIndex = 1000

// errMalformedQuery is the answer to a body that is not a valid query
// string or is larger than the simulator reads (Common Errors:
// MalformedQueryString, "The query string contains a syntax error", HTTP
// status 404).
func errMalformedQuery(reason string) *APIError {
	e := newError("MalformedQueryString", "The query string contains a syntax error: %s", reason)
	e.HTTPStatus = http.StatusNotFound
	return e
}

// checkQuery refuses, before dispatch, what EC2 refuses of any action: a
// Version other than apiVersion (EC2: NoSuchVersion), a parameter sent
// twice (InvalidQueryParameter: "The AWS query string is malformed or does
// not adhere to AWS standards"; EC2 never lets one of two values win), and
// a key with an empty, signed, zero, zero-padded or out-of-range list index
// (UnknownParameter: no EC2 parameter is named InstanceId.-1 or
// Filter.99999). It returns nil for a well-formed request; a missing
// Version is left to the caller (MissingParameter).
func checkQuery(form url.Values) *APIError {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first offending key, deterministically
	for _, k := range keys {
		if len(form[k]) > 1 {
			return newError("InvalidQueryParameter", "The AWS query string is malformed or does not adhere to AWS standards: parameter %s is repeated", truncate(k))
		}
	}
	if v := form.Get("Version"); v != "" && v != apiVersion {
		return newError("NoSuchVersion", "The requested version (%s) of service AmazonEC2 does not exist", truncate(v))
	}
	for _, k := range keys {
		if !wellFormedKey(k) {
			return newError("UnknownParameter", "The parameter %s is not recognized", truncate(k))
		}
	}
	return nil
}

// wellFormedKey reports whether every dot-separated segment of a query key
// is a name or a list index in [1, maxListIndex] without sign or leading
// zero.
func wellFormedKey(k string) bool {
	for seg := range strings.SplitSeq(k, ".") {
		if seg == "" {
			return false
		}
		c := seg[0]
		if !(c >= '0' && c <= '9') && c != '-' && c != '+' {
			continue // a name
		}
		if c == '0' || len(seg) > 4 {
			return false
		}
		n, err := strconv.Atoi(seg)
		if err != nil || n < 1 || n > maxListIndex || strconv.Itoa(n) != seg {
			return false
		}
	}
	return true
}

// truncate shortens hostile input quoted in an error message.
func truncate(s string) string {
	const maxQuoted = 128
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "..."
	}
	return s
}

// reParamKubernetesVersion finds the Kubernetes version in the paths of the
// public EKS AMI parameters (/aws/service/eks/optimized-ami/<v>/...,
// /aws/service/bottlerocket/aws-k8s-<v>[-nvidia]/...,
// /aws/service/ami-windows-latest/Windows_Server-...-EKS_Optimized-<v>/...).
var reParamKubernetesVersion = regexp.MustCompile(`^/aws/service/(?:eks/optimized-ami/|bottlerocket/aws-k8s-|ami-windows-latest/Windows_Server-[^/]*-EKS_Optimized-)([^/]*?)(?:-nvidia)?(?:/|$)`)

// reKubernetesMinor is a Kubernetes 1.x version as EKS publishes AMIs for
// it: major 1, a minor without leading zero of at most two digits.
var reKubernetesMinor = regexp.MustCompile(`^1\.[1-9][0-9]?$`)

// publishedKubernetesVersion reports whether AWS could publish the public
// parameter path: paths without a Kubernetes version are left to the path
// patterns; a version that is not 1.<minor> (99999999999999999999.1,
// 1.035, 2.0) has no parameters, so SSM answers ParameterNotFound.
func publishedKubernetesVersion(path string) bool {
	m := reParamKubernetesVersion.FindStringSubmatch(path)
	return m == nil || reKubernetesMinor.MatchString(m[1])
}

// maxParameterName is SSM's limit on a parameter name, in characters
// ("AWS Systems Manager endpoints and quotas": parameter name length, 2048
// including the path); longer names fail GetParameter's validation.
const maxParameterName = 2048

// checkParameterName returns SSM's ValidationException for a name longer
// than maxParameterName.
func checkParameterName(name string) *APIError {
	if len(name) > maxParameterName {
		return newError("ValidationException", "1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must have length less than or equal to %d", truncate(name), maxParameterName)
	}
	return nil
}
