package ec2sim

import (
	"encoding/json"
	"regexp"
	"strconv"
	"time"
)

// Amazon SQS messages: SendMessage, ReceiveMessage (long polling on
// Config.Clock), DeleteMessage, DeleteMessageBatch and
// ChangeMessageVisibility. The wire protocol is in action_sqs.go, the queue
// semantics (visibility, receipt handles, retention) in sqs.go.

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

// epochMillis renders a time the way SQS attributes carry timestamps.
func epochMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

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
