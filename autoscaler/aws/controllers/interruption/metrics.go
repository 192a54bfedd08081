package interruption

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"
)

// MessageTypeMalformed is the message_type of messages that do not parse
// (Karpenter logs those without counting them).
const MessageTypeMalformed = "malformed"

// MessageTypeRejected is the message_type of messages that parse but name
// another account or region than this cluster's (messages.Origin);
// karpx_interruption_rejected_messages_total says which. Karpenter does
// not check either.
const MessageTypeRejected = "rejected"

// Metrics, with the names, labels and buckets of Karpenter v1.13's
// interruption controller (aws/karpenter-provider-aws
// pkg/controllers/interruption/metrics.go) where it has them.
var (
	receivedMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "received_messages_total",
		Help: "Count of messages received from the SQS queue. Broken down by message type (spot_interrupted, rebalance_recommendation, scheduled_change, instance_stopped, instance_terminated, no_op, malformed, rejected).",
	}, []string{"message_type"})
	deletedMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "deleted_messages_total",
		Help: "Count of messages deleted from the SQS queue.",
	})
	messageQueueDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "message_queue_duration_seconds",
		Help:    "Amount of time an interruption message is on the queue before it is processed by karpx, in seconds.",
		Buckets: durationBuckets,
	})
	queueErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpx_interruption_queue_errors_total",
		Help: "Failed calls to the interruption queue, by operation (receive, delete). Nothing in the cluster is changed on a failed call.",
	}, []string{"operation"})
	// rejectedMessages has no Karpenter counterpart (Karpenter acts on
	// any well-formed message), hence the karpx_ prefix.
	rejectedMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpx_interruption_rejected_messages_total",
		Help: "Interruption messages deleted unacted on because their account is not the queue owner's or their region not the controller's, by reason (account_mismatch, region_mismatch).",
	}, []string{"reason"})
)

// durationBuckets are Karpenter v1.13's metrics.DurationBuckets (seconds,
// 5 ms to 600 s; sigs.k8s.io/karpenter pkg/metrics/constants.go).
var durationBuckets = kmetrics.DurationBuckets()

func init() {
	crmetrics.Registry.MustRegister(receivedMessages, deletedMessages, messageQueueDuration, queueErrors, rejectedMessages)
}
