package awsquota

import "sort"

// Category names a throttling category: every action of a category has a
// token bucket of its own ("each API is evaluated individually", EC2), of
// the category's size and refill rate.
type Category string

// EC2 and SSM categories. Each constant's comment gives the actions it
// covers; their buckets are in Buckets. UnfilteredNonMutating is the second
// bucket of the actions with Charge.Unfiltered (in EC2 also
// DescribeNetworkInterfaces, DescribeVolumes, DescribeSnapshots and
// DescribeSpotInstanceRequests) for calls without filters, ids, names and
// MaxResults. SSM GetParameter's default throughput is 40 transactions per
// second; AWS documents no burst, so its bucket is 40 refilled at 40/s.
const (
	NonMutating           Category = "non-mutating"            // Describe*, filtered DescribeInstances
	UnfilteredNonMutating Category = "unfiltered-non-mutating" // bare DescribeInstances, DescribeSecurityGroups
	Mutating              Category = "mutating"                // Create*, Delete*, Modify* (CreateFleet, CreateLaunchTemplate)
	RunInstances          Category = "run-instances"           // RunInstances
	TerminateInstances    Category = "terminate-instances"     // TerminateInstances
	CreateTags            Category = "create-tags"             // CreateTags
	SSMGetParameter       Category = "ssm-get-parameter"       // SSM GetParameter
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
	SQSReceive Category = "sqs-receive" // ReceiveMessage
	SQSDelete  Category = "sqs-delete"  // DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility
	SQSSend    Category = "sqs-send"    // SendMessage
	SQSQueue   Category = "sqs-queue"   // GetQueueUrl, GetQueueAttributes, CreateQueue, SetQueueAttributes
)

// IAM, EKS and Pricing are the categories of the IAM actions, of EKS
// DescribeCluster and of the AWS Price List Query API (GetProducts). None
// of the three services publishes request rates, so they have no bucket in
// Buckets: their calls are not throttled by default. Unthrottled reports
// them.
const (
	IAM     Category = "iam"
	EKS     Category = "eks"
	Pricing Category = "pricing"
)

// Unthrottled reports whether c is a category without a published rate
// (IAM, EKS, Pricing), which Buckets leaves out.
func Unthrottled(c Category) bool { return c == IAM || c == EKS || c == Pricing }

// Bucket is a token bucket: a request takes one token.
type Bucket struct {
	// Size is the capacity of the bucket, in requests (the burst).
	Size float64 `json:"size"`
	// RefillPerSecond is the sustained rate, in requests per second.
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// Buckets returns the default bucket of every category that has one (all
// but IAM, EKS and Pricing), per account and region: size in requests, refill in requests
// per second. The map is new on every call, so callers may override
// entries.
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

// actionsByCategory lists every action karpx calls or the simulator
// answers (EC2, SSM, SQS, IAM, EKS and Pricing names as AWS spells them) under the
// category its calls are charged to.
var actionsByCategory = map[Category][]string{
	NonMutating: {"DescribeAvailabilityZones", "DescribeSubnets", "DescribeSecurityGroups", "DescribeImages", "DescribeInstanceTypes",
		"DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory", "DescribeLaunchTemplates", "DescribeInstances", "DescribeInstanceStatus",
		"DescribeCapacityReservations"},
	Mutating:           {"CreateLaunchTemplate", "DeleteLaunchTemplate", "CreateFleet"},
	RunInstances:       {"RunInstances"},
	TerminateInstances: {"TerminateInstances"},
	CreateTags:         {"CreateTags"},
	SSMGetParameter:    {"GetParameter"},
	SQSQueue:           {"GetQueueUrl", "GetQueueAttributes", "CreateQueue", "SetQueueAttributes"},
	SQSSend:            {"SendMessage"},
	SQSReceive:         {"ReceiveMessage"},
	SQSDelete:          {"DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility"},
	IAM: {"CreateInstanceProfile", "GetInstanceProfile", "AddRoleToInstanceProfile", "RemoveRoleFromInstanceProfile",
		"DeleteInstanceProfile", "TagInstanceProfile", "ListInstanceProfiles"},
	EKS:     {"DescribeCluster"},
	Pricing: {"GetProducts"},
}

// withUnfilteredBucket are the actions whose bare calls EC2 charges to
// UnfilteredNonMutating.
var withUnfilteredBucket = map[string]bool{"DescribeInstances": true, "DescribeSecurityGroups": true}

// charges indexes actionsByCategory by action.
var charges = func() map[string]Charge {
	m := map[string]Charge{}
	for cat, actions := range actionsByCategory {
		for _, a := range actions {
			m[a] = Charge{Category: cat, Unfiltered: withUnfilteredBucket[a]}
		}
	}
	return m
}()

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
