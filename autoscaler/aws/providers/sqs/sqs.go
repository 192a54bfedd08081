package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
