package ec2sim

import (
	"strconv"
	"strings"
	"time"
)

// Amazon SQS queue administration: GetQueueUrl, CreateQueue,
// GetQueueAttributes and SetQueueAttributes. The wire protocol is in
// action_sqs.go, the messages in action_sqs_messages.go, the queues
// themselves in sqs.go.

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
