package awsquota

import "sort"

// Category names a throttling category: every action of a category has a
// token bucket of its own ("each API is evaluated individually", EC2), of
// the category's size and refill rate.
type Category string

// EC2 and SSM categories, with AWS's default bucket per account and region.
const (
	// NonMutating is Describe* (DescribeSubnets, DescribeImages,
	// DescribeInstanceTypes, filtered DescribeInstances, ...): bucket 100
	// requests, refill 20 requests per second.
	NonMutating Category = "non-mutating"
	// UnfilteredNonMutating is DescribeInstances and DescribeSecurityGroups
	// (and, in EC2, DescribeNetworkInterfaces, DescribeVolumes,
	// DescribeSnapshots, DescribeSpotInstanceRequests) called without
	// filters, ids, names and MaxResults: bucket 50, refill 10 per second.
	UnfilteredNonMutating Category = "unfiltered-non-mutating"
	// Mutating is Create*, Delete*, Modify* (CreateFleet,
	// CreateLaunchTemplate, DeleteLaunchTemplate): bucket 50, refill 5 per
	// second.
	Mutating Category = "mutating"
	// RunInstances is RunInstances: bucket 5, refill 2 per second.
	RunInstances Category = "run-instances"
	// TerminateInstances is TerminateInstances: bucket 100, refill 5 per
	// second.
	TerminateInstances Category = "terminate-instances"
	// CreateTags is CreateTags: bucket 100, refill 10 per second.
	CreateTags Category = "create-tags"
	// SSMGetParameter is SSM GetParameter: default throughput 40
	// transactions per second. AWS documents no burst; the bucket is 40
	// requests, refilled at 40 per second.
	SSMGetParameter Category = "ssm-get-parameter"
)

// SQS publishes no per-account API rate for standard queues ("nearly
// unlimited number of API calls per second, per API action", Amazon SQS
// Developer Guide, "Amazon SQS standard queues"); its only per-action
// figure is FIFO's 3,000 messages per second with batching ("Amazon SQS
// FIFO queue quotas"). The table uses that figure for the message actions,
// as bucket and refill, so only a consumer spinning without long polling
// is ever throttled, and 100 per second for the queue-management actions,
// which a consumer calls once at start.
const (
	// SQSReceive is ReceiveMessage: bucket 3,000, refill 3,000 per second.
	SQSReceive Category = "sqs-receive"
	// SQSDelete is DeleteMessage, DeleteMessageBatch and
	// ChangeMessageVisibility: bucket 3,000, refill 3,000 per second.
	SQSDelete Category = "sqs-delete"
	// SQSSend is SendMessage: bucket 3,000, refill 3,000 per second.
	SQSSend Category = "sqs-send"
	// SQSQueue is GetQueueUrl, GetQueueAttributes, CreateQueue and
	// SetQueueAttributes: bucket 100, refill 100 per second.
	SQSQueue Category = "sqs-queue"
)

// IAM is the category of the IAM actions. IAM publishes no request rates,
// so it has no bucket in Buckets: IAM calls are not throttled by default.
const IAM Category = "iam"

// Bucket is a token bucket: a request takes one token.
type Bucket struct {
	// Size is the capacity of the bucket, in requests (the burst).
	Size float64 `json:"size"`
	// RefillPerSecond is the sustained rate, in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// Buckets returns the default bucket of every category that has one (all
// but IAM), per account and region. The map is new on every call, so
// callers may override entries.
func Buckets() map[Category]Bucket {
	return map[Category]Bucket{
		NonMutating:           {Size: 100, RefillPerSecond: 20},
		UnfilteredNonMutating: {Size: 50, RefillPerSecond: 10},
		Mutating:              {Size: 50, RefillPerSecond: 5},
		RunInstances:          {Size: 5, RefillPerSecond: 2},
		TerminateInstances:    {Size: 100, RefillPerSecond: 5},
		CreateTags:            {Size: 100, RefillPerSecond: 10},
		SSMGetParameter:       {Size: 40, RefillPerSecond: 40},
		SQSReceive:            {Size: 3000, RefillPerSecond: 3000},
		SQSDelete:             {Size: 3000, RefillPerSecond: 3000},
		SQSSend:               {Size: 3000, RefillPerSecond: 3000},
		SQSQueue:              {Size: 100, RefillPerSecond: 100},
	}
}

// Charge is how an action is charged: the category of its bucket and
// whether its bare calls have a bucket of their own.
type Charge struct {
	// Category is the category of calls with filters, ids, names or
	// MaxResults (of every call, for actions without an unfiltered bucket).
	Category Category
	// Unfiltered is true for the actions whose calls without filters, ids,
	// names, MaxResults and NextToken EC2 charges to a second bucket of
	// the UnfilteredNonMutating category (DescribeInstances,
	// DescribeSecurityGroups).
	Unfiltered bool
}

// charges maps every action karpx calls or the simulator answers (EC2,
// SSM, SQS and IAM names as AWS spells them) to its charge.
var charges = map[string]Charge{
	"DescribeAvailabilityZones":     {Category: NonMutating},
	"DescribeSubnets":               {Category: NonMutating},
	"DescribeSecurityGroups":        {Category: NonMutating, Unfiltered: true},
	"DescribeImages":                {Category: NonMutating},
	"DescribeInstanceTypes":         {Category: NonMutating},
	"DescribeInstanceTypeOfferings": {Category: NonMutating},
	"DescribeSpotPriceHistory":      {Category: NonMutating},
	"DescribeLaunchTemplates":       {Category: NonMutating},
	"DescribeInstances":             {Category: NonMutating, Unfiltered: true},
	"CreateLaunchTemplate":          {Category: Mutating},
	"DeleteLaunchTemplate":          {Category: Mutating},
	"CreateFleet":                   {Category: Mutating},
	"RunInstances":                  {Category: RunInstances},
	"TerminateInstances":            {Category: TerminateInstances},
	"CreateTags":                    {Category: CreateTags},
	"GetParameter":                  {Category: SSMGetParameter},
	"GetQueueUrl":                   {Category: SQSQueue},
	"GetQueueAttributes":            {Category: SQSQueue},
	"CreateQueue":                   {Category: SQSQueue},
	"SetQueueAttributes":            {Category: SQSQueue},
	"SendMessage":                   {Category: SQSSend},
	"ReceiveMessage":                {Category: SQSReceive},
	"DeleteMessage":                 {Category: SQSDelete},
	"DeleteMessageBatch":            {Category: SQSDelete},
	"ChangeMessageVisibility":       {Category: SQSDelete},
	"CreateInstanceProfile":         {Category: IAM},
	"GetInstanceProfile":            {Category: IAM},
	"AddRoleToInstanceProfile":      {Category: IAM},
	"RemoveRoleFromInstanceProfile": {Category: IAM},
	"DeleteInstanceProfile":         {Category: IAM},
	"TagInstanceProfile":            {Category: IAM},
}

// ChargeOf returns the charge of action (e.g. "DescribeInstances"); ok is
// false for an action the table does not list.
func ChargeOf(action string) (c Charge, ok bool) {
	c, ok = charges[action]
	return c, ok
}

// CategoryOf returns the category a call of action is charged to: bare
// reports a call without filters, ids, names, MaxResults and NextToken,
// which goes to UnfilteredNonMutating for the actions that have such a
// bucket. ok is false for an action the table does not list.
func CategoryOf(action string, bare bool) (cat Category, ok bool) {
	c, ok := charges[action]
	if c.Unfiltered && bare {
		return UnfilteredNonMutating, ok
	}
	return c.Category, ok
}

// Actions returns the name of every action the table lists, sorted.
func Actions() []string {
	out := make([]string, 0, len(charges))
	for a := range charges {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
