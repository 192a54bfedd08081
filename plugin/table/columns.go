package table

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Column is one column of a table: its header (upper-cased when printed),
// cell type, and Priority 1 for a column only -o wide shows.
type Column = metav1.TableColumnDefinition

// Wide returns c shown only with -o wide (priority 1).
func Wide(c Column) Column {
	c.Priority = 1
	return c
}

// Named returns c as the table's first, name-formatted column under header.
func Named(c Column, header string) Column {
	c.Name, c.Format = header, "name"
	return c
}

// Columns of the NodeClaim tables (kubectl karpx status, nodeclaims,
// capacity and status's empty nodes).
var (
	// NodeClaim is the NodeClaim's name.
	NodeClaim = Column{Name: "NodeClaim", Type: "string", Format: "name", Description: "Name of the NodeClaim."}
	// NodePool is the NodeClaim's karpenter.sh/nodepool label.
	NodePool = Column{Name: "NodePool", Type: "string", Description: "Value of the karpenter.sh/nodepool label."}
	// InstanceType is the node.kubernetes.io/instance-type label.
	InstanceType = Column{Name: "Instance-Type", Type: "string", Description: "Value of the node.kubernetes.io/instance-type label."}
	// Zone is the topology.kubernetes.io/zone label.
	Zone = Column{Name: "Zone", Type: "string", Description: "Value of the topology.kubernetes.io/zone label."}
	// Node is the NodeClaim's status.nodeName.
	Node = Column{Name: "Node", Type: "string", Description: "status.nodeName."}
	// Image is the NodeClaim's status.imageID.
	Image = Column{Name: "Image", Type: "string", Priority: 1, Description: "status.imageID, the machine image."}
	// Age is the time since creation.
	Age = Column{Name: "Age", Type: "string", Description: "Time since creation."}
)

// Columns of kubectl karpx throttle's category and action tables: one
// client-side token bucket (or the emptiest of a category's) and its
// counters since the controller started.
var (
	// Category is the bucket's EC2 throttling category.
	Category = Column{Name: "Category", Type: "string", Description: "EC2 throttling category of the bucket (SSM GetParameter has its own)."}
	// Bucket is the bucket's size.
	Bucket = Column{Name: "Bucket", Type: "string", Description: "Size of the bucket (each bucket of a category), in requests."}
	// Refill is the bucket's refill rate.
	Refill = Column{Name: "Refill/s", Type: "string", Description: "Refill rate, in requests per second."}
	// Tokens is what the bucket holds now.
	Tokens = Column{Name: "Tokens", Type: "string", Description: "Tokens left (in a category's emptiest bucket)."}
	// Rate is the bucket's adaptation to throttled answers.
	Rate = Column{Name: "Rate", Type: "string", Description: "Share of the configured rate the (slowest) bucket runs at after RequestLimitExceeded answers, and the number of slow-downs."}
	// Requests counts calls sent.
	Requests = Column{Name: "Requests", Type: "integer", Description: "Calls sent to AWS since the controller started."}
	// Throttled counts throttled answers.
	Throttled = Column{Name: "Throttled", Type: "integer", Description: "Throttled answers (RequestLimitExceeded and other throttle codes)."}
	// Retries counts SDK retries.
	Retries = Column{Name: "Retries", Type: "integer", Description: "SDK attempts beyond the first."}
	// Errors counts failed calls.
	Errors = Column{Name: "Errors", Type: "integer", Description: "Failed calls."}
	// QuotaErrors counts calls failed on the SDK's retry quota.
	QuotaErrors = Column{Name: "Quota-Errors", Type: "integer", Description: "Calls failed with the SDK's 'retry quota exceeded'."}
	// Exhausted counts speculative calls refused client-side.
	Exhausted = Column{Name: "Exhausted", Type: "integer", Description: "Speculative calls refused client-side (never sent)."}
	// WaitP50 is the median client-side wait for a token.
	WaitP50 = Column{Name: "Wait-P50", Type: "string", Description: "Median client-side wait for a token (recent calls)."}
	// WaitP99 is the 99th percentile client-side wait for a token.
	WaitP99 = Column{Name: "Wait-P99", Type: "string", Description: "99th percentile of the client-side wait for a token (recent calls)."}
)

// Columns of the findings tables of kubectl karpx lint and audit.
var (
	// Source is where the object came from.
	Source = Column{Name: "Source", Type: "string", Description: "File the object came from (- for standard input), or cluster for a live object."}
	// Object is the object's kind and name.
	Object = Column{Name: "Object", Type: "string", Description: "Kind/name of the object."}
	// Severity is deny or warning.
	Severity = Column{Name: "Severity", Type: "string", Description: "deny (the webhook or API server would reject it) or warning."}
	// Rule is the rule's ID.
	Rule = Column{Name: "Rule", Type: "string", Description: "Rule ID, e.g. KX003 (docs/rules.md)."}
	// Field is the offending field.
	Field = Column{Name: "Field", Type: "string", Description: "Offending field and line."}
	// Finding is what is wrong.
	Finding = Column{Name: "Finding", Type: "string", Description: "What is wrong."}
	// Fix is how to correct it.
	Fix = Column{Name: "Fix", Type: "string", Priority: 1, Description: "How to correct it."}
)
