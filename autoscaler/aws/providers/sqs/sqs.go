package sqs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// Long-polling parameters (Amazon SQS API Reference, ReceiveMessage).
const (
	// WaitTimeSeconds is the long-poll wait: 20 s, the maximum SQS allows
	// and Karpenter's.
	WaitTimeSeconds = 20
	// MaxMessages is the most messages one ReceiveMessage returns: 10, the
	// maximum SQS allows.
	MaxMessages = 10
	// VisibilityTimeoutSeconds hides a received message from other
	// receivers for 20 s (Karpenter's): a message not deleted because
	// handling it failed comes back after that and is handled again.
	VisibilityTimeoutSeconds = 20
)

// Message is one received message.
type Message struct {
	// ID is SQS's message id.
	ID string
	// ReceiptHandle identifies this receipt for Delete.
	ReceiptHandle string
	// Body is the message body (an EventBridge event, JSON).
	Body string
	// SentAt is when SQS received the message (SentTimestamp); zero when
	// not reported.
	SentAt time.Time
}

// Provider reads one queue. It is safe for concurrent use.
type Provider struct {
	api  ec2api.SQSAPI
	name string

	mu  sync.Mutex
	url string
}

// New returns a Provider of the queue called name (not its URL or ARN).
func New(api ec2api.SQSAPI, name string) *Provider {
	return &Provider{api: api, name: name}
}

// Name returns the queue's name.
func (p *Provider) Name() string { return p.name }

// URL returns the queue's URL, resolved once with GetQueueUrl. It returns
// the SQS error (wrapped) when the queue cannot be resolved, e.g.
// AWS.SimpleQueueService.NonExistentQueue for a wrong --interruption-queue.
func (p *Provider) URL(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.url != "" {
		return p.url, nil
	}
	out, err := p.api.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(p.name)})
	if err != nil {
		return "", fmt.Errorf("resolving interruption queue %q (--interruption-queue): %w", p.name, err)
	}
	if out.QueueUrl == nil || *out.QueueUrl == "" {
		return "", fmt.Errorf("resolving interruption queue %q: GetQueueUrl returned no URL", p.name)
	}
	p.url = *out.QueueUrl
	return p.url, nil
}

// OwnerAccount returns the 12-digit AWS account id that owns the queue:
// the first path segment of its URL, which SQS forms as
// https://sqs.<region>.amazonaws.com/<account-id>/<queue-name> (Amazon SQS
// Developer Guide, "Amazon SQS queue and message identifiers"). It resolves
// the URL first (see URL) and returns that error, or an error naming the
// URL when its path does not start with a 12-digit account id (an
// --sqs-endpoint that serves another URL form).
func (p *Provider) OwnerAccount(ctx context.Context) (string, error) {
	raw, err := p.URL(ctx)
	if err != nil {
		return "", err
	}
	return AccountOfURL(raw)
}

// AccountOfURL returns the account id in a queue URL
// (https://sqs.us-east-1.amazonaws.com/123456789012/name → 123456789012),
// or an error naming the URL when it has no 12-digit first path segment
// followed by the queue name.
func AccountOfURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("interruption queue URL %q: %w", raw, err)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[1] == "" || !isAccountID(parts[0]) {
		return "", fmt.Errorf("interruption queue URL %q: the path is not /<12-digit account id>/<queue name>, so the queue's owner account is unknown and no message can be checked against it", raw)
	}
	return parts[0], nil
}

func isAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Receive long-polls the queue for up to WaitTimeSeconds and returns at
// most MaxMessages messages (none when the wait ends empty). It returns
// SQS's error (wrapped) on failure; the URL is resolved again after a
// NonExistentQueue error (the queue was recreated).
func (p *Provider) Receive(ctx context.Context) ([]Message, error) {
	url, err := p.URL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := p.api.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         MaxMessages,
		WaitTimeSeconds:             WaitTimeSeconds,
		VisibilityTimeout:           VisibilityTimeoutSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		p.forgetOnMissing(err)
		return nil, fmt.Errorf("receiving from interruption queue %q: %w", p.name, err)
	}
	msgs := make([]Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg := Message{ID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body)}
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			msg.SentAt = time.UnixMilli(ms)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Delete deletes a received message. It returns SQS's error (wrapped); a
// receipt handle that expired means the message will be received again.
func (p *Provider) Delete(ctx context.Context, m Message) error {
	url, err := p.URL(ctx)
	if err != nil {
		return err
	}
	if _, err := p.api.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
		p.forgetOnMissing(err)
		return fmt.Errorf("deleting message %s from interruption queue %q: %w", m.ID, p.name, err)
	}
	return nil
}

func (p *Provider) forgetOnMissing(err error) {
	var missing *types.QueueDoesNotExist
	if errors.As(err, &missing) {
		p.mu.Lock()
		p.url = ""
		p.mu.Unlock()
	}
}
