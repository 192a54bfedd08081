package ec2sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
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

// epochMillis renders a time the way SQS attributes carry timestamps.
func epochMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// --- GetQueueUrl, CreateQueue ---------------------------------------------

type sqsQueueURLOutput struct {
	QueueURL string `json:"QueueUrl"`
}

func (s *Simulator) sqsGetQueueURL(req *request) (any, error) {
	var in struct {
		QueueName              string `json:"QueueName"`
		QueueOwnerAWSAccountID string `json:"QueueOwnerAWSAccountId"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	if in.QueueName == "" {
		return nil, errMissingParameter("QueueName")
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q := s.sqs.queues[in.QueueName]
	if q == nil || (in.QueueOwnerAWSAccountID != "" && in.QueueOwnerAWSAccountID != s.cfg.AccountID) {
		return nil, errQueueDoesNotExist()
	}
	return &sqsQueueURLOutput{QueueURL: s.queueURL(req.endpoint, q)}, nil
}

// parseQueueAttrs applies CreateQueue/SetQueueAttributes attributes to base.
// It returns which attribute names were set.
func parseQueueAttrs(attrs map[string]string, base queueAttrs) (queueAttrs, *APIError) {
	seconds := func(name, v string, lo, hi int) (time.Duration, *APIError) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, newError("InvalidAttributeValue", "Invalid value for the parameter %s. Reason: must be an integer from %d to %d.", name, lo, hi)
		}
		return time.Duration(n) * time.Second, nil
	}
	out := base
	for name, v := range attrs {
		var e *APIError
		switch name {
		case "VisibilityTimeout":
			out.visibility, e = seconds(name, v, 0, int(SQSMaxVisibilityTimeout/time.Second))
		case "MessageRetentionPeriod":
			out.retention, e = seconds(name, v, 60, 14*24*3600)
		case "ReceiveMessageWaitTimeSeconds":
			out.receiveWait, e = seconds(name, v, 0, int(SQSMaxWaitTime/time.Second))
		case "DelaySeconds":
			out.delay, e = seconds(name, v, 0, 900)
		case "MaximumMessageSize":
			var d time.Duration
			if d, e = seconds(name, v, 1024, SQSMaxMessageSize); e == nil {
				out.maxSize = int(d / time.Second)
			}
		default:
			e = newError("InvalidAttributeName", "Unknown Attribute %s. ec2sim supports VisibilityTimeout, MessageRetentionPeriod, ReceiveMessageWaitTimeSeconds, DelaySeconds and MaximumMessageSize.", name)
		}
		if e != nil {
			return base, e
		}
	}
	return out, nil
}

func (s *Simulator) sqsCreateQueue(req *request) (any, error) {
	var in struct {
		QueueName  string            `json:"QueueName"`
		Attributes map[string]string `json:"Attributes"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	if in.QueueName == "" {
		return nil, errMissingParameter("QueueName")
	}
	if err := validQueueName(in.QueueName); err != nil {
		return nil, newError(CodeInvalidParameterValue, "%v", err)
	}
	attrs, e := parseQueueAttrs(in.Attributes, defaultQueueAttrs())
	if e != nil {
		return nil, e
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	if q := s.sqs.queues[in.QueueName]; q != nil {
		// CreateQueue is idempotent for equal attributes.
		if cur, _ := parseQueueAttrs(in.Attributes, q.attrs); cur != q.attrs {
			return nil, newError("QueueNameExists", "A queue already exists with the same name and a different value for attribute(s) %s", strings.Join(sortedKeys(in.Attributes), ", "))
		}
		return &sqsQueueURLOutput{QueueURL: s.queueURL(req.endpoint, q)}, nil
	}
	q := s.sqs.createLocked(in.QueueName, attrs, req.now)
	s.log.Info("Queue created", "queue", q.name)
	return &sqsQueueURLOutput{QueueURL: s.queueURL(req.endpoint, q)}, nil
}

// --- GetQueueAttributes, SetQueueAttributes -------------------------------

type sqsAttributesOutput struct {
	Attributes map[string]string `json:"Attributes,omitempty"`
}

// queueAttributeNames are the attributes GetQueueAttributes answers.
var queueAttributeNames = []string{
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn", "MessageRetentionPeriod", "VisibilityTimeout",
	"ReceiveMessageWaitTimeSeconds", "DelaySeconds", "MaximumMessageSize", "SqsManagedSseEnabled",
}

func (s *Simulator) sqsGetQueueAttributes(req *request) (any, error) {
	var in struct {
		QueueURL       string   `json:"QueueUrl"`
		AttributeNames []string `json:"AttributeNames"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	s.syncEvents()
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	st := q.countsLocked(s.clock.Now())
	all := map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(st.Visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(st.InFlight),
		"ApproximateNumberOfMessagesDelayed":    strconv.Itoa(st.Delayed),
		"CreatedTimestamp":                      strconv.FormatInt(q.created.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.modified.Unix(), 10),
		"QueueArn":                              s.sqs.arn(q.name),
		"MessageRetentionPeriod":                strconv.Itoa(int(q.attrs.retention / time.Second)),
		"VisibilityTimeout":                     strconv.Itoa(int(q.attrs.visibility / time.Second)),
		"ReceiveMessageWaitTimeSeconds":         strconv.Itoa(int(q.attrs.receiveWait / time.Second)),
		"DelaySeconds":                          strconv.Itoa(int(q.attrs.delay / time.Second)),
		"MaximumMessageSize":                    strconv.Itoa(q.attrs.maxSize),
		"SqsManagedSseEnabled":                  "true",
	}
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			return &sqsAttributesOutput{Attributes: all}, nil
		}
		v, ok := all[n]
		if !ok {
			return nil, newError("InvalidAttributeName", "Unknown Attribute %s.", n)
		}
		out[n] = v
	}
	return &sqsAttributesOutput{Attributes: out}, nil
}

func (s *Simulator) sqsSetQueueAttributes(req *request) (any, error) {
	var in struct {
		QueueURL   string            `json:"QueueUrl"`
		Attributes map[string]string `json:"Attributes"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	attrs, e := parseQueueAttrs(in.Attributes, q.attrs)
	if e != nil {
		return nil, e
	}
	q.attrs, q.modified = attrs, req.now
	return struct{}{}, nil
}

// --- SendMessage ----------------------------------------------------------

type sqsSendMessageOutput struct {
	MessageID        string `json:"MessageId"`
	MD5OfMessageBody string `json:"MD5OfMessageBody"`
}

func (s *Simulator) sqsSendMessage(req *request) (any, error) {
	var in struct {
		QueueURL          string          `json:"QueueUrl"`
		MessageBody       *string         `json:"MessageBody"`
		DelaySeconds      *int            `json:"DelaySeconds"`
		MessageAttributes json.RawMessage `json:"MessageAttributes"`
		MessageGroupID    string          `json:"MessageGroupId"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	if in.MessageBody == nil {
		return nil, errMissingParameter("MessageBody")
	}
	if len(in.MessageAttributes) > 0 && string(in.MessageAttributes) != "{}" && string(in.MessageAttributes) != "null" {
		return nil, newError(CodeInvalidParameterValue, "MessageAttributes are not simulated by ec2sim; send the data in the body.")
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	if in.MessageGroupID != "" {
		return nil, newError(CodeInvalidParameterValue, "The request include parameter that is not valid for this queue type. Reason: MessageGroupId is for FIFO queues.")
	}
	delay := q.attrs.delay
	if in.DelaySeconds != nil {
		if *in.DelaySeconds < 0 || *in.DelaySeconds > 900 {
			return nil, newError(CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", *in.DelaySeconds)
		}
		delay = time.Duration(*in.DelaySeconds) * time.Second
	}
	if e := checkBody(*in.MessageBody, q.attrs.maxSize); e != nil {
		return nil, e
	}
	m := s.sqs.sendLocked(q, *in.MessageBody, s.cfg.AccountID, req.now, delay)
	return &sqsSendMessageOutput{MessageID: m.id, MD5OfMessageBody: m.md5}, nil
}

// --- ReceiveMessage -------------------------------------------------------

type sqsMessageJSON struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

type sqsReceiveMessageOutput struct {
	Messages []sqsMessageJSON `json:"Messages,omitempty"`
}

// messageSystemAttributes are the names ReceiveMessage accepts in
// MessageSystemAttributeNames (and the deprecated AttributeNames). The
// FIFO-only ones are accepted and never returned.
var messageSystemAttributes = map[string]bool{
	"All": true, "SenderId": true, "SentTimestamp": true, "ApproximateReceiveCount": true,
	"ApproximateFirstReceiveTimestamp": true, "SequenceNumber": true, "MessageDeduplicationId": true,
	"MessageGroupId": true, "AWSTraceHeader": true, "DeadLetterQueueSourceArn": true,
}

func (s *Simulator) sqsReceiveMessage(req *request) (any, error) {
	var in struct {
		QueueURL                    string   `json:"QueueUrl"`
		AttributeNames              []string `json:"AttributeNames"`
		MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
		MessageAttributeNames       []string `json:"MessageAttributeNames"`
		MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
		VisibilityTimeout           *int     `json:"VisibilityTimeout"`
		WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	max := 1
	if in.MaxNumberOfMessages != nil {
		if max = *in.MaxNumberOfMessages; max < 1 || max > SQSMaxBatch {
			return nil, newError(CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max)
		}
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || time.Duration(*in.VisibilityTimeout)*time.Second > SQSMaxVisibilityTimeout) {
		return nil, newError(CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || time.Duration(*in.WaitTimeSeconds)*time.Second > SQSMaxWaitTime) {
		return nil, newError(CodeInvalidParameterValue, "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	}
	want := map[string]bool{}
	for _, n := range append(append([]string{}, in.AttributeNames...), in.MessageSystemAttributeNames...) {
		if !messageSystemAttributes[n] {
			return nil, newError("InvalidAttributeName", "Unknown Attribute %s.", n)
		}
		want[n] = true
	}

	s.sqs.mu.Lock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		s.sqs.mu.Unlock()
		return nil, e
	}
	vis, wait := q.attrs.visibility, q.attrs.receiveWait
	s.sqs.mu.Unlock()
	if in.VisibilityTimeout != nil {
		vis = time.Duration(*in.VisibilityTimeout) * time.Second
	}
	if in.WaitTimeSeconds != nil {
		wait = time.Duration(*in.WaitTimeSeconds) * time.Second
	}
	// Long polling: answer as soon as a message is receivable, or with
	// none after wait (Config.Clock). A client that goes away ends it.
	deadline := req.now.Add(wait)
	for {
		s.syncEvents()
		now := s.clock.Now()
		s.sqs.mu.Lock()
		msgs := s.sqs.receiveLocked(q, now, max, vis)
		out := &sqsReceiveMessageOutput{}
		for _, m := range msgs {
			out.Messages = append(out.Messages, sqsMessageJSON{MessageID: m.id, ReceiptHandle: m.handle, MD5OfBody: m.md5,
				Body: m.body, Attributes: messageAttributes(m, want)})
		}
		wake, next := q.wake, q.nextVisibleLocked(now)
		s.sqs.mu.Unlock()
		if len(msgs) > 0 || !now.Before(deadline) {
			return out, nil
		}
		d := deadline.Sub(now)
		if !next.IsZero() && next.Sub(now) < d {
			d = next.Sub(now)
		}
		t := s.clock.NewTimer(d)
		select {
		case <-wake:
		case <-t.C():
		case <-req.ctx.Done():
			t.Stop()
			return &sqsReceiveMessageOutput{}, nil
		}
		t.Stop()
	}
}

func messageAttributes(m *sqsMessage, want map[string]bool) map[string]string {
	if len(want) == 0 {
		return nil
	}
	all := want["All"]
	out := map[string]string{}
	if all || want["SenderId"] {
		out["SenderId"] = m.sender
	}
	if all || want["SentTimestamp"] {
		out["SentTimestamp"] = epochMillis(m.sent)
	}
	if all || want["ApproximateReceiveCount"] {
		out["ApproximateReceiveCount"] = strconv.Itoa(m.receives)
	}
	if all || want["ApproximateFirstReceiveTimestamp"] {
		out["ApproximateFirstReceiveTimestamp"] = epochMillis(m.firstReceive)
	}
	return out
}

// --- DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility -----------

func (s *Simulator) sqsDeleteMessage(req *request) (any, error) {
	var in struct {
		QueueURL      string `json:"QueueUrl"`
		ReceiptHandle string `json:"ReceiptHandle"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	if in.ReceiptHandle == "" {
		return nil, errMissingParameter("ReceiptHandle")
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	if e := q.deleteLocked(in.ReceiptHandle); e != nil {
		return nil, e
	}
	return struct{}{}, nil
}

type sqsBatchResultEntry struct {
	ID string `json:"Id"`
}

type sqsBatchErrorEntry struct {
	ID          string `json:"Id"`
	SenderFault bool   `json:"SenderFault"`
	Code        string `json:"Code"`
	Message     string `json:"Message,omitempty"`
}

type sqsDeleteMessageBatchOutput struct {
	Successful []sqsBatchResultEntry `json:"Successful"`
	Failed     []sqsBatchErrorEntry  `json:"Failed"`
}

// reBatchEntryID is the rule for batch entry ids: up to 80 alphanumeric
// characters, hyphens and underscores.
var reBatchEntryID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (s *Simulator) sqsDeleteMessageBatch(req *request) (any, error) {
	var in struct {
		QueueURL string `json:"QueueUrl"`
		Entries  []struct {
			ID            string `json:"Id"`
			ReceiptHandle string `json:"ReceiptHandle"`
		} `json:"Entries"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	switch {
	case len(in.Entries) == 0:
		return nil, newError("EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	case len(in.Entries) > SQSMaxBatch:
		return nil, newError("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(in.Entries))
	}
	seen := map[string]bool{}
	for _, en := range in.Entries {
		if !reBatchEntryID.MatchString(en.ID) {
			return nil, newError("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[en.ID] {
			return nil, newError("BatchEntryIdsNotDistinct", "Id %s repeated.", en.ID)
		}
		seen[en.ID] = true
	}
	out := &sqsDeleteMessageBatchOutput{Successful: []sqsBatchResultEntry{}, Failed: []sqsBatchErrorEntry{}}
	for _, en := range in.Entries {
		if en.ReceiptHandle == "" {
			out.Failed = append(out.Failed, sqsBatchErrorEntry{ID: en.ID, SenderFault: true, Code: CodeMissingParameter,
				Message: "The request must contain the parameter ReceiptHandle."})
			continue
		}
		if e := q.deleteLocked(en.ReceiptHandle); e != nil {
			out.Failed = append(out.Failed, sqsBatchErrorEntry{ID: en.ID, SenderFault: true, Code: e.Code, Message: e.Message})
			continue
		}
		out.Successful = append(out.Successful, sqsBatchResultEntry{ID: en.ID})
	}
	return out, nil
}

func (s *Simulator) sqsChangeMessageVisibility(req *request) (any, error) {
	var in struct {
		QueueURL          string `json:"QueueUrl"`
		ReceiptHandle     string `json:"ReceiptHandle"`
		VisibilityTimeout *int   `json:"VisibilityTimeout"`
	}
	if e := decodeSQS(req.json, &in); e != nil {
		return nil, e
	}
	if in.ReceiptHandle == "" {
		return nil, errMissingParameter("ReceiptHandle")
	}
	if in.VisibilityTimeout == nil {
		return nil, errMissingParameter("VisibilityTimeout")
	}
	if v := *in.VisibilityTimeout; v < 0 || time.Duration(v)*time.Second > SQSMaxVisibilityTimeout {
		return nil, newError(CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", v)
	}
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, e := s.queueFromURL(in.QueueURL)
	if e != nil {
		return nil, e
	}
	name, id, ok := parseHandle(in.ReceiptHandle)
	if !ok || name != q.name {
		return nil, errInvalidHandle(in.ReceiptHandle)
	}
	for _, m := range q.messages {
		if m.id != id {
			continue
		}
		if m.handle != in.ReceiptHandle {
			return nil, newError(CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", in.ReceiptHandle)
		}
		if !req.now.Before(m.visibleAt) {
			return nil, newError("MessageNotInflight", "The message referred to isn't in flight.")
		}
		m.visibleAt = req.now.Add(time.Duration(*in.VisibilityTimeout) * time.Second)
		if *in.VisibilityTimeout == 0 {
			q.signal()
		}
		return struct{}{}, nil
	}
	return nil, newError(CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", in.ReceiptHandle)
}
