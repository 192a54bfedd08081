package ec2sim

import (
	"fmt"
	"net/http"
	"strings"
)

// APIError is an error answer of the simulated EC2 or SSM API: the error
// code the SDK surfaces as smithy.APIError.ErrorCode(), its message, and the
// HTTP status the answer is sent with.
//
// Codes and statuses follow the Amazon EC2 API Reference, "Error codes for
// the Amazon EC2 API" (client errors are 400, RequestLimitExceeded and
// Unavailable 503, InternalError 500, DryRunOperation 412).
type APIError struct {
	// Code is the EC2 error code, for example "InvalidInstanceID.NotFound".
	Code string
	// Message is the human-readable message.
	Message string
	// HTTPStatus is the status code of the answer.
	HTTPStatus int
}

// Error implements error.
func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Well-known EC2 error codes used by the simulator.
const (
	CodeRequestLimitExceeded         = "RequestLimitExceeded"
	CodeInternalError                = "InternalError"
	CodeUnavailable                  = "Unavailable"
	CodeInvalidAction                = "InvalidAction"
	CodeMissingAction                = "MissingAction"
	CodeMissingParameter             = "MissingParameter"
	CodeInvalidParameterValue        = "InvalidParameterValue"
	CodeInvalidParameterCombination  = "InvalidParameterCombination"
	CodeInvalidPaginationToken       = "InvalidPaginationToken"
	CodeInsufficientInstanceCapacity = "InsufficientInstanceCapacity"
	CodeUnsupported                  = "Unsupported"
	CodeDryRunOperation              = "DryRunOperation"
)

// defaultStatus returns the HTTP status EC2 answers a given code with.
func defaultStatus(code string) int {
	switch code {
	case CodeRequestLimitExceeded, CodeUnavailable, "ServiceUnavailable":
		return http.StatusServiceUnavailable
	case CodeInternalError, "InternalFailure":
		return http.StatusInternalServerError
	case CodeDryRunOperation:
		return http.StatusPreconditionFailed
	case "AuthFailure":
		return http.StatusUnauthorized
	case "UnauthorizedOperation":
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// defaultMessage returns the message EC2 sends with the server-side codes.
func defaultMessage(code string) string {
	switch code {
	case CodeRequestLimitExceeded:
		return "Request limit exceeded."
	case CodeInternalError:
		return "An internal error has occurred"
	case CodeUnavailable:
		return "The server is overloaded and can't handle the request."
	case "ThrottlingException":
		return "Rate exceeded"
	}
	return code
}

func newError(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), HTTPStatus: defaultStatus(code)}
}

func errMissingParameter(name string) *APIError {
	return newError(CodeMissingParameter, "The request must contain the parameter %s", name)
}

func errInvalidValue(value, param string) *APIError {
	return newError(CodeInvalidParameterValue, "Invalid value '%s' for %s", value, param)
}

func errInvalidFilter(name string) *APIError {
	return newError(CodeInvalidParameterValue, "The filter '%s' is invalid", name)
}

func errMaxResults(v string, lo, hi int) *APIError {
	return newError(CodeInvalidParameterValue, "Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, lo, hi)
}

// errMalformedID is the answer to an id that does not have the shape of a
// resource id, e.g. code "InvalidInstanceID.Malformed".
func errMalformedID(code, id, prefix string) *APIError {
	return newError(code, "Invalid id: \"%s\" (expecting \"%s...\")", id, prefix)
}

// quoteList renders ids the way EC2 lists them in NotFound messages.
func quoteList(ids []string) string { return strings.Join(ids, ", ") }
