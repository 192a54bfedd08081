package ec2sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Amazon SQS over AWS JSON 1.0, as aws-sdk-go-v2's service/sqs (v1.52)
// speaks it: POST / with X-Amz-Target: AmazonSQS.<Action> and a JSON body;
// answers are JSON, errors carry "__type" (com.amazonaws.sqs#<Shape> for
// modelled errors) and, because SQS is awsQueryCompatible, the
// x-amzn-query-error header "<query code>;Sender|Receiver" when the request
// had X-Amzn-Query-Mode: true. The SDK then reports the query code as
// ErrorCode() (QueueDoesNotExist surfaces as
// "AWS.SimpleQueueService.NonExistentQueue", as against SQS); match errors
// with errors.As and the sqs/types error structs.
//
// This file is the wire side: dispatch, errors, request decoding and queue
// URLs. The actions are in action_sqs_queues.go (queue administration) and
// action_sqs_messages.go (messages).

// sqsErrorShapes maps the simulator's SQS error codes to their query
// (legacy XML) codes, from the SQS service model's awsQueryError traits.
// Codes not listed are their own query code.
var sqsErrorShapes = map[string]string{
	"QueueDoesNotExist":            "AWS.SimpleQueueService.NonExistentQueue",
	"ReceiptHandleIsInvalid":       "ReceiptHandleIsInvalid",
	"RequestThrottled":             "RequestThrottled",
	"EmptyBatchRequest":            "AWS.SimpleQueueService.EmptyBatchRequest",
	"TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
	"BatchEntryIdsNotDistinct":     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
	"InvalidBatchEntryId":          "AWS.SimpleQueueService.InvalidBatchEntryId",
	"MessageNotInflight":           "AWS.SimpleQueueService.MessageNotInflight",
	"QueueNameExists":              "QueueAlreadyExists",
	"InvalidAttributeName":         "InvalidAttributeName",
	"InvalidAttributeValue":        "InvalidAttributeValue",
	"InvalidMessageContents":       "InvalidMessageContents",
	"InvalidAddress":               "InvalidAddress",
	"UnsupportedOperation":         "AWS.SimpleQueueService.UnsupportedOperation",
}

// serveSQS answers AWS JSON 1.0 calls (X-Amz-Target: AmazonSQS.<Action>).
func (s *Simulator) serveSQS(w http.ResponseWriter, r *http.Request, reqID, target string) {
	queryMode := r.Header.Get("X-Amzn-Query-Mode") == "true"
	name, _ := strings.CutPrefix(target, "AmazonSQS.")
	spec := lookupAction(name)
	if spec == nil || spec.service != serviceSQS {
		e := newError("UnknownOperationException", "Unknown operation %s", target)
		s.metrics.observe(serviceSQS, "Unknown", 0, e, false)
		writeSQSError(w, reqID, e, queryMode)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeSQSError(w, reqID, newError("SerializationException", "%v", err), queryMode)
		return
	}
	s.responseDelay()
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	out, apiErr := s.dispatch(&request{ctx: r.Context(), spec: spec, json: body, p: newParams(nil), endpoint: scheme + r.Host})
	if apiErr != nil {
		writeSQSError(w, reqID, apiErr, queryMode)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(out)
}

// writeSQSError writes SQS's JSON error: status, "__type", "message",
// X-Amzn-ErrorType and, in query mode, x-amzn-query-error.
func writeSQSError(w http.ResponseWriter, reqID string, e *APIError, queryMode bool) {
	status := e.HTTPStatus
	if status == 0 {
		status = defaultStatus(e.Code)
	}
	typ := e.Code
	query, modelled := sqsErrorShapes[e.Code]
	if modelled {
		typ = "com.amazonaws.sqs#" + e.Code
	} else {
		query = e.Code
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.Header().Set("X-Amzn-ErrorType", typ)
	if queryMode {
		fault := "Sender"
		if status >= 500 {
			fault = "Receiver"
		}
		w.Header().Set("x-amzn-query-error", query+";"+fault)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": e.Message})
}

// decodeSQS decodes a JSON request body into v.
func decodeSQS(body []byte, v any) *APIError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return newError("SerializationException", "Cannot deserialize the request body: %v", err)
	}
	return nil
}

// queueFromURL resolves a QueueUrl (<endpoint>/<account-id>/<queue-name>;
// only the path is read). Call with s.sqs.mu held.
func (s *Simulator) queueFromURL(raw string) (*sqsQueue, *APIError) {
	if raw == "" {
		return nil, errMissingParameter("QueueUrl")
	}
	u, err := url.Parse(raw)
	parts := []string{}
	if err == nil {
		parts = strings.Split(strings.Trim(u.Path, "/"), "/")
	}
	if err != nil || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, newError("InvalidAddress", "The address %s is not valid for this endpoint.", raw)
	}
	q := s.sqs.queues[parts[1]]
	if q == nil || parts[0] != s.cfg.AccountID {
		return nil, errQueueDoesNotExist()
	}
	return q, nil
}

func errQueueDoesNotExist() *APIError {
	return newError("QueueDoesNotExist", "The specified queue does not exist.")
}

func (s *Simulator) queueURL(endpoint string, q *sqsQueue) string {
	return strings.TrimSuffix(endpoint, "/") + "/" + s.cfg.AccountID + "/" + q.name
}
