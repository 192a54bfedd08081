package ec2sim

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the simulated Amazon SQS standard queues: messages,
// visibility timeouts, receipt handles and retention, as the Amazon SQS
// Developer Guide describes them, and the Go API tests use to look at a
// queue (QueueStats) or put messages into it. The wire protocol (AWS JSON
// 1.0) is in action_sqs.go, the actions in action_sqs_queues.go and
// action_sqs_messages.go.
//
// Semantics kept from SQS standard queues:
//   - at-least-once delivery: a received message is invisible for its
//     visibility timeout and then delivered again, with a new receipt
//     handle and ApproximateReceiveCount + 1, until it is deleted;
//   - DeleteMessage needs the most recent receipt handle: an older one
//     succeeds without deleting ("otherwise, the request succeeds, but the
//     message will not be deleted", DeleteMessage API reference); deleting
//     an already deleted message succeeds;
//   - messages older than MessageRetentionPeriod are dropped.
//
// Differences: short polls (WaitTimeSeconds 0) see every visible message
// (SQS samples a subset of its servers); order is send order (SQS standard
// queues order on a best-effort basis); FIFO queues, message attributes,
// dead-letter queues and the in-flight quota (OverLimit) are not modelled.

// SQS limits and defaults (Amazon SQS Developer Guide, "Amazon SQS message
// quotas" and the CreateQueue API reference).
const (
	// SQSDefaultVisibilityTimeout is a queue's default VisibilityTimeout.
	SQSDefaultVisibilityTimeout = 30 * time.Second
	// SQSMaxVisibilityTimeout is the longest visibility timeout, 12 hours.
	SQSMaxVisibilityTimeout = 12 * time.Hour
	// SQSDefaultRetention is a queue's default MessageRetentionPeriod, 4 days.
	SQSDefaultRetention = 4 * 24 * time.Hour
	// SQSMaxWaitTime is the longest ReceiveMessage long poll, 20 seconds.
	SQSMaxWaitTime = 20 * time.Second
	// SQSMaxMessageSize is the default and largest MaximumMessageSize in
	// bytes (1 MiB since August 2025).
	SQSMaxMessageSize = 1 << 20
	// SQSMaxBatch is the most entries of a batch request and the largest
	// MaxNumberOfMessages of ReceiveMessage.
	SQSMaxBatch = 10
)

// QueueStats are the counters and current contents of a simulated queue,
// as served by /_sim/sqs.
type QueueStats struct {
	// Name is the queue name.
	Name string `json:"name"`
	// URL is the queue URL path, /<account-id>/<name> (the host is the
	// endpoint the caller used).
	URL string `json:"url"`
	// ARN is arn:aws:sqs:<region>:<account-id>:<name>.
	ARN string `json:"arn"`
	// Sent is the number of messages added: SendMessage calls, SendRawMessage
	// and simulated EventBridge events.
	Sent int64 `json:"sent"`
	// Received is the number of deliveries by ReceiveMessage, every
	// re-delivery included.
	Received int64 `json:"received"`
	// Redelivered is the number of deliveries of messages received before
	// (ApproximateReceiveCount above 1): at-least-once duplicates.
	Redelivered int64 `json:"redelivered"`
	// Deleted is the number of messages deleted (DeleteMessage and
	// DeleteMessageBatch entries that removed a message).
	Deleted int64 `json:"deleted"`
	// StaleDeletes is the number of deletes with a receipt handle that was
	// no longer the message's latest, which succeed without deleting.
	StaleDeletes int64 `json:"staleDeletes"`
	// Expired is the number of messages dropped after MessageRetentionPeriod.
	Expired int64 `json:"expired"`
	// Visible is the number of messages available to ReceiveMessage now
	// (ApproximateNumberOfMessages).
	Visible int `json:"visible"`
	// InFlight is the number of received, undeleted messages still within
	// their visibility timeout (ApproximateNumberOfMessagesNotVisible).
	InFlight int `json:"inFlight"`
	// Delayed is the number of messages sent with DelaySeconds not yet
	// visible (ApproximateNumberOfMessagesDelayed).
	Delayed int `json:"delayed"`
}

// QueueMessage is a message in a simulated queue, as QueueMessages returns it.
type QueueMessage struct {
	// MessageID is the SQS message id (a UUID).
	MessageID string `json:"messageId"`
	// Body is the message body.
	Body string `json:"body"`
	// SentAt is when the message was added.
	SentAt time.Time `json:"sentAt"`
	// ReceiveCount is ApproximateReceiveCount: how often it was delivered.
	ReceiveCount int `json:"receiveCount"`
	// InFlight reports whether it is received and within its visibility
	// timeout.
	InFlight bool `json:"inFlight"`
}

// queueAttrs are the settable attributes of a queue.
type queueAttrs struct {
	visibility  time.Duration // VisibilityTimeout
	retention   time.Duration // MessageRetentionPeriod
	receiveWait time.Duration // ReceiveMessageWaitTimeSeconds
	delay       time.Duration // DelaySeconds
	maxSize     int           // MaximumMessageSize, bytes
}

func defaultQueueAttrs() queueAttrs {
	return queueAttrs{visibility: SQSDefaultVisibilityTimeout, retention: SQSDefaultRetention, maxSize: SQSMaxMessageSize}
}

type sqsMessage struct {
	id, body, md5 string
	sent          time.Time
	visibleAt     time.Time // not receivable before
	receives      int
	firstReceive  time.Time
	handle        string // latest receipt handle, "" until received
	sender        string
}

type sqsQueue struct {
	name     string
	created  time.Time
	modified time.Time
	attrs    queueAttrs
	messages []*sqsMessage // send order
	// wake is closed (and replaced) when a message may have become
	// receivable; long polls wait on it.
	wake  chan struct{}
	stats QueueStats
}

// sqsState holds every queue. Lock order: Simulator.mu before sqsState.mu.
type sqsState struct {
	mu      sync.Mutex
	queues  map[string]*sqsQueue
	ids     *idGen // message ids and receipt-handle nonces
	account string
	region  string
}

func newSQSState(cfg *Config) *sqsState {
	st := &sqsState{queues: map[string]*sqsQueue{}, ids: newIDGen(cfg.Seed ^ 0x5e5), account: cfg.AccountID, region: cfg.Region}
	if cfg.InterruptionQueue != "" {
		st.createLocked(cfg.InterruptionQueue, defaultQueueAttrs(), cfg.Clock.Now())
	}
	return st
}

func (st *sqsState) createLocked(name string, attrs queueAttrs, now time.Time) *sqsQueue {
	q := &sqsQueue{name: name, created: now, modified: now, attrs: attrs, wake: make(chan struct{})}
	q.stats.Name, q.stats.URL, q.stats.ARN = name, "/"+st.account+"/"+name, st.arn(name)
	st.queues[name] = q
	return q
}

func (st *sqsState) arn(name string) string {
	return "arn:aws:sqs:" + st.region + ":" + st.account + ":" + name
}

// reQueueName is CreateQueue's rule for standard queue names: 1 to 80
// alphanumeric characters, hyphens and underscores.
var reQueueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func validQueueName(name string) error {
	if !reQueueName.MatchString(name) {
		return fmt.Errorf("queue name %q is invalid: use 1 to 80 letters, digits, hyphens and underscores (FIFO queues, \".fifo\", are not simulated)", name)
	}
	return nil
}

// signal wakes the long polls of q. Call with st.mu held.
func (q *sqsQueue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// expireLocked drops messages past the retention period.
func (q *sqsQueue) expireLocked(now time.Time) {
	kept := q.messages[:0]
	for _, m := range q.messages {
		if !now.Before(m.sent.Add(q.attrs.retention)) {
			q.stats.Expired++
			continue
		}
		kept = append(kept, m)
	}
	clear(q.messages[len(kept):])
	q.messages = kept
}

// countsLocked fills the Visible, InFlight and Delayed gauges.
func (q *sqsQueue) countsLocked(now time.Time) QueueStats {
	q.expireLocked(now)
	out := q.stats
	for _, m := range q.messages {
		switch {
		case !now.Before(m.visibleAt):
			out.Visible++
		case m.receives > 0:
			out.InFlight++
		default:
			out.Delayed++
		}
	}
	return out
}

// sendLocked appends a message and wakes long polls. body must be valid.
func (st *sqsState) sendLocked(q *sqsQueue, body, sender string, now time.Time, delay time.Duration) *sqsMessage {
	sum := md5.Sum([]byte(body))
	m := &sqsMessage{id: st.ids.uuid(""), body: body, md5: hex.EncodeToString(sum[:]), sent: now, visibleAt: now.Add(delay), sender: sender}
	q.messages = append(q.messages, m)
	q.stats.Sent++
	q.signal()
	return m
}

// checkBody applies SendMessage's rules: not empty, at most maxSize bytes
// of UTF-8, only the characters SQS allows (#x9 | #xA | #xD | #x20 to
// #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF).
func checkBody(body string, maxSize int) *APIError {
	if body == "" {
		return newError(CodeMissingParameter, "The request must contain the parameter MessageBody.")
	}
	if len(body) > maxSize {
		return newError(CodeInvalidParameterValue, "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", maxSize)
	}
	if !utf8.ValidString(body) {
		return newError("InvalidMessageContents", "Invalid binary character in message body: the body must be UTF-8.")
	}
	for _, r := range body {
		if !(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)) {
			return newError("InvalidMessageContents", "Invalid binary character '#x%X' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF", r)
		}
	}
	return nil
}

// Receipt handles are opaque to clients; they encode the queue, the
// message and a nonce unique to each delivery.
const handlePrefix = "ec2sim-rh:"

func (st *sqsState) newHandle(q *sqsQueue, m *sqsMessage) string {
	return base64.RawURLEncoding.EncodeToString([]byte(handlePrefix + q.name + "\x00" + m.id + "\x00" + st.ids.next("")))
}

// parseHandle returns the queue name and message id of a receipt handle.
func parseHandle(h string) (queue, msgID string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(string(b), handlePrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "\x00")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func errInvalidHandle(h string) *APIError {
	return newError("ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", h)
}

// deleteLocked deletes the message of handle h from q. It returns
// ReceiptHandleIsInvalid for a handle that is not one of q's; a stale
// handle or an already deleted message succeed without effect.
func (q *sqsQueue) deleteLocked(h string) *APIError {
	name, id, ok := parseHandle(h)
	if !ok || name != q.name {
		return errInvalidHandle(h)
	}
	for i, m := range q.messages {
		if m.id != id {
			continue
		}
		if m.handle != h {
			q.stats.StaleDeletes++
			return nil
		}
		q.messages = append(q.messages[:i], q.messages[i+1:]...)
		q.stats.Deleted++
		return nil
	}
	return nil // already deleted or expired
}

// receiveLocked delivers up to max visible messages, hiding each for vis.
func (st *sqsState) receiveLocked(q *sqsQueue, now time.Time, max int, vis time.Duration) []*sqsMessage {
	q.expireLocked(now)
	var out []*sqsMessage
	for _, m := range q.messages {
		if len(out) == max {
			break
		}
		if now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		if m.receives == 1 {
			m.firstReceive = now
		} else {
			q.stats.Redelivered++
		}
		m.visibleAt = now.Add(vis)
		m.handle = st.newHandle(q, m)
		q.stats.Received++
		out = append(out, m)
	}
	return out
}

// nextVisibleLocked returns when the next invisible message becomes
// visible (zero when none will).
func (q *sqsQueue) nextVisibleLocked(now time.Time) time.Time {
	var next time.Time
	for _, m := range q.messages {
		if now.Before(m.visibleAt) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next
}

// ErrNoInterruptionQueue is returned by SendRawMessage when
// Config.InterruptionQueue is empty.
var ErrNoInterruptionQueue = fmt.Errorf("ec2sim: no interruption queue: set Config.InterruptionQueue (ec2sim --interruption-queue)")

func (s *Simulator) queue(name string) (*sqsQueue, error) {
	q := s.sqs.queues[name]
	if q == nil {
		return nil, fmt.Errorf("ec2sim: queue %q does not exist (known: %s)", name, strings.Join(sortedKeys(s.sqs.queues), ", "))
	}
	return q, nil
}

// SendRawMessage adds a message with body to the interruption queue
// (Config.InterruptionQueue), as SendMessage would, so tests can inject
// malformed, unknown or duplicate events. It returns the message id, or
// ErrNoInterruptionQueue, or an error naming the rule an invalid body
// breaks (empty, over MaximumMessageSize, characters SQS refuses).
func (s *Simulator) SendRawMessage(body string) (string, error) {
	if s.cfg.InterruptionQueue == "" {
		return "", ErrNoInterruptionQueue
	}
	return s.SendMessage(s.cfg.InterruptionQueue, body)
}

// SendMessage adds a message with body to the named queue. It returns the
// message id, an error when the queue does not exist, or the reason SQS
// would refuse the body.
func (s *Simulator) SendMessage(queue, body string) (string, error) {
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, err := s.queue(queue)
	if err != nil {
		return "", err
	}
	if e := checkBody(body, q.attrs.maxSize); e != nil {
		return "", fmt.Errorf("ec2sim: message refused: %w", e)
	}
	return s.sqs.sendLocked(q, body, s.cfg.AccountID, s.clock.Now(), q.attrs.delay).id, nil
}

// QueueStats returns the counters and contents of the named queue, after
// delivering any pending instance state-change events. It returns an
// error when the queue does not exist.
func (s *Simulator) QueueStats(queue string) (QueueStats, error) {
	s.syncEvents()
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, err := s.queue(queue)
	if err != nil {
		return QueueStats{}, err
	}
	return q.countsLocked(s.clock.Now()), nil
}

// Queues returns the stats of every queue, by name.
func (s *Simulator) Queues() []QueueStats {
	s.syncEvents()
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	now := s.clock.Now()
	out := make([]QueueStats, 0, len(s.sqs.queues))
	for _, name := range sortedKeys(s.sqs.queues) {
		out = append(out, s.sqs.queues[name].countsLocked(now))
	}
	return out
}

// QueueMessages returns the undeleted messages of the named queue in send
// order, or an error when the queue does not exist.
func (s *Simulator) QueueMessages(queue string) ([]QueueMessage, error) {
	s.syncEvents()
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, err := s.queue(queue)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	q.expireLocked(now)
	out := make([]QueueMessage, 0, len(q.messages))
	for _, m := range q.messages {
		out = append(out, QueueMessage{MessageID: m.id, Body: m.body, SentAt: m.sent, ReceiveCount: m.receives,
			InFlight: m.receives > 0 && now.Before(m.visibleAt)})
	}
	return out, nil
}

// RedeliverInFlight ends the visibility timeout of every in-flight message
// of the named queue now, as if it had expired: the next ReceiveMessage
// delivers them again (a duplicate delivery, ApproximateReceiveCount + 1,
// new receipt handle), as SQS does when a consumer does not delete in
// time. It returns how many messages it made visible, or an error when the
// queue does not exist.
func (s *Simulator) RedeliverInFlight(queue string) (int, error) {
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q, err := s.queue(queue)
	if err != nil {
		return 0, err
	}
	now := s.clock.Now()
	n := 0
	for _, m := range q.messages {
		if m.receives > 0 && now.Before(m.visibleAt) {
			m.visibleAt = now
			n++
		}
	}
	if n > 0 {
		q.signal()
	}
	return n, nil
}

// sqsCollector reports the queues at scrape time:
// ec2sim_sqs_messages{queue,state} (visible, in_flight, delayed) and
// ec2sim_sqs_messages_total{queue,event} (sent, received, redelivered,
// deleted, stale_delete, expired).
type sqsCollector struct {
	s             *Simulator
	gauge, counts *prometheus.Desc
}

func newSQSCollector(s *Simulator) sqsCollector {
	return sqsCollector{s: s,
		gauge: prometheus.NewDesc("ec2sim_sqs_messages", "Messages in each simulated SQS queue now, by state (visible, in_flight, delayed).",
			[]string{"queue", "state"}, nil),
		counts: prometheus.NewDesc("ec2sim_sqs_messages_total", "Messages of each simulated SQS queue by event (sent, received, redelivered, deleted, stale_delete, expired).",
			[]string{"queue", "event"}, nil)}
}

func (c sqsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.gauge; ch <- c.counts }

func (c sqsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.s.Queues() {
		for state, v := range map[string]int{"visible": q.Visible, "in_flight": q.InFlight, "delayed": q.Delayed} {
			ch <- prometheus.MustNewConstMetric(c.gauge, prometheus.GaugeValue, float64(v), q.Name, state)
		}
		for event, v := range map[string]int64{"sent": q.Sent, "received": q.Received, "redelivered": q.Redelivered,
			"deleted": q.Deleted, "stale_delete": q.StaleDeletes, "expired": q.Expired} {
			ch <- prometheus.MustNewConstMetric(c.counts, prometheus.CounterValue, float64(v), q.Name, event)
		}
	}
}
