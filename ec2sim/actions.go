package ec2sim

import "github.com/karpx/karpx/catalog/awsquota"

// This file is the index of the simulator: actionTable lists every action it
// answers, the token bucket (throttling category) each call is charged to and
// the fault hooks that apply. Anything else is answered with InvalidAction
// (EC2) or UnknownOperationException (SSM, SQS).

// faultHook is a bit set of the fault kinds an action honours.
type faultHook uint8

const (
	hookError faultHook = 1 << iota
	hookLatency
	hookCapacity
	hookStatus // FailStatusChecks (action_instancestatus.go)

	hooksDefault = hookError | hookLatency
)

// service names the wire protocol of an action.
type service string

const (
	serviceEC2 service = "ec2" // EC2 Query protocol, XML answers
	serviceSSM service = "ssm" // AWS JSON 1.1, X-Amz-Target: AmazonSSM.<Action>
	serviceSQS service = "sqs" // AWS JSON 1.0, X-Amz-Target: AmazonSQS.<Action> (action_sqs.go)
	serviceIAM service = "iam" // IAM Query protocol, Version=2010-05-08 (iam.go)
	serviceEKS service = "eks" // REST-JSON, GET /clusters/{name} (eks.go)
	// servicePricing is AWS JSON 1.1, X-Amz-Target:
	// AWSPriceListService.<Action> (pricing.go).
	servicePricing service = "pricing"
)

type handlerFunc func(s *Simulator, req *request) (any, error)

type actionSpec struct {
	name    string
	service service
	hooks   faultHook
	handle  handlerFunc
}

// charge returns how a's calls are charged to the token buckets, from
// awsquota's table (TestActionTableIsDocumented checks that it lists every
// action).
func (a *actionSpec) charge() awsquota.Charge {
	c, _ := awsquota.ChargeOf(a.name)
	return c
}

// actionTable, at a glance (TestActionTableIsDocumented keeps this in step):
//
//	Action                         Service  Bucket               Unfiltered  Faults
//	DescribeAvailabilityZones      ec2      non-mutating         -           error,latency
//	DescribeSubnets                ec2      non-mutating         -           error,latency
//	DescribeSecurityGroups         ec2      non-mutating         yes         error,latency
//	DescribeImages                 ec2      non-mutating         -           error,latency
//	DescribeInstanceTypes          ec2      non-mutating         -           error,latency
//	DescribeInstanceTypeOfferings  ec2      non-mutating         -           error,latency
//	DescribeSpotPriceHistory       ec2      non-mutating         -           error,latency
//	DescribeLaunchTemplates        ec2      non-mutating         -           error,latency
//	CreateLaunchTemplate           ec2      mutating             -           error,latency
//	DeleteLaunchTemplate           ec2      mutating             -           error,latency
//	CreateFleet                    ec2      mutating             -           error,latency,capacity
//	RunInstances                   ec2      run-instances        -           error,latency,capacity
//	DescribeInstances              ec2      non-mutating         yes         error,latency
//	DescribeInstanceStatus         ec2      non-mutating         -           error,latency,status
//	DescribeCapacityReservations   ec2      non-mutating         -           error,latency
//	TerminateInstances             ec2      terminate-instances  -           error,latency
//	CreateTags                     ec2      create-tags          -           error,latency
//	GetParameter                   ssm      ssm-get-parameter    -           error,latency
//	GetQueueUrl                    sqs      sqs-queue            -           error,latency
//	GetQueueAttributes             sqs      sqs-queue            -           error,latency
//	CreateQueue                    sqs      sqs-queue            -           error,latency
//	SetQueueAttributes             sqs      sqs-queue            -           error,latency
//	SendMessage                    sqs      sqs-send             -           error,latency
//	ReceiveMessage                 sqs      sqs-receive          -           error,latency
//	DeleteMessage                  sqs      sqs-delete           -           error,latency
//	DeleteMessageBatch             sqs      sqs-delete           -           error,latency
//	ChangeMessageVisibility        sqs      sqs-delete           -           error,latency
//
// Bucket is the throttling category (from catalog/awsquota, which holds the
// charge of every action and the sizes in DefaultThrottleConfig: AWS's
// "Request throttling for the Amazon EC2 API"; the SQS figures are a
// choice, see awsquota.SQSReceive). Unfiltered "yes" means a call
// without filters, ids, names and MaxResults is charged to the
// unfiltered-non-mutating bucket instead (50 tokens, 10/s). Faults: "error"
// honours FaultRule.Code, "latency" FaultRule.Latency, "capacity"
// CapacityFault (per-override InsufficientInstanceCapacity in CreateFleet's
// errorSet; the whole call for RunInstances), "status" StatusCheckFault
// (FailStatusChecks: impaired instance or system status checks).
var actionTable = []actionSpec{
	// {name, service, bucket, unfiltered, faults, handler}
	{"DescribeAvailabilityZones", serviceEC2, hooksDefault, (*Simulator).describeAvailabilityZones},
	{"DescribeSubnets", serviceEC2, hooksDefault, (*Simulator).describeSubnets},
	{"DescribeSecurityGroups", serviceEC2, hooksDefault, (*Simulator).describeSecurityGroups},
	{"DescribeImages", serviceEC2, hooksDefault, (*Simulator).describeImages},
	{"DescribeInstanceTypes", serviceEC2, hooksDefault, (*Simulator).describeInstanceTypes},
	{"DescribeInstanceTypeOfferings", serviceEC2, hooksDefault, (*Simulator).describeInstanceTypeOfferings},
	{"DescribeSpotPriceHistory", serviceEC2, hooksDefault, (*Simulator).describeSpotPriceHistory},
	{"DescribeLaunchTemplates", serviceEC2, hooksDefault, (*Simulator).describeLaunchTemplates},
	{"CreateLaunchTemplate", serviceEC2, hooksDefault, (*Simulator).createLaunchTemplate},
	{"DeleteLaunchTemplate", serviceEC2, hooksDefault, (*Simulator).deleteLaunchTemplate},
	{"CreateFleet", serviceEC2, hooksDefault | hookCapacity, (*Simulator).createFleet},
	{"RunInstances", serviceEC2, hooksDefault | hookCapacity, (*Simulator).runInstances},
	{"DescribeInstances", serviceEC2, hooksDefault, (*Simulator).describeInstances},
	{"DescribeInstanceStatus", serviceEC2, hooksDefault | hookStatus, (*Simulator).describeInstanceStatus},
	{"DescribeCapacityReservations", serviceEC2, hooksDefault, (*Simulator).describeCapacityReservations},
	{"TerminateInstances", serviceEC2, hooksDefault, (*Simulator).terminateInstances},
	{"CreateTags", serviceEC2, hooksDefault, (*Simulator).createTags},
	{"GetParameter", serviceSSM, hooksDefault, (*Simulator).getParameter},
	{"GetQueueUrl", serviceSQS, hooksDefault, (*Simulator).sqsGetQueueURL},
	{"GetQueueAttributes", serviceSQS, hooksDefault, (*Simulator).sqsGetQueueAttributes},
	{"CreateQueue", serviceSQS, hooksDefault, (*Simulator).sqsCreateQueue},
	{"SetQueueAttributes", serviceSQS, hooksDefault, (*Simulator).sqsSetQueueAttributes},
	{"SendMessage", serviceSQS, hooksDefault, (*Simulator).sqsSendMessage},
	{"ReceiveMessage", serviceSQS, hooksDefault, (*Simulator).sqsReceiveMessage},
	{"DeleteMessage", serviceSQS, hooksDefault, (*Simulator).sqsDeleteMessage},
	{"DeleteMessageBatch", serviceSQS, hooksDefault, (*Simulator).sqsDeleteMessageBatch},
	{"ChangeMessageVisibility", serviceSQS, hooksDefault, (*Simulator).sqsChangeMessageVisibility},
}

// unbucketedTable, at a glance (TestActionTableIsDocumented keeps this in
// step): the actions of IAM, EKS and the AWS Price List Query API, which
// publish no request rates, so their categories have no default bucket and
// their calls are not throttled unless ThrottleConfig.Categories sets one
// (then IAM answers Throttling, EKS and Pricing ThrottlingException, all
// 400). Faults apply to them by action name like to EC2's.
//
//	Action                         Service  Bucket               Unfiltered  Faults
//	CreateInstanceProfile          iam      iam                  -           error,latency
//	GetInstanceProfile             iam      iam                  -           error,latency
//	AddRoleToInstanceProfile       iam      iam                  -           error,latency
//	RemoveRoleFromInstanceProfile  iam      iam                  -           error,latency
//	DeleteInstanceProfile          iam      iam                  -           error,latency
//	TagInstanceProfile             iam      iam                  -           error,latency
//	ListInstanceProfiles           iam      iam                  -           error,latency
//	DescribeCluster                eks      eks                  -           error,latency
//	GetProducts                    pricing  pricing              -           error,latency
//
// IAM is the Query protocol (Version=2010-05-08, iam.go), EKS REST-JSON
// (GET /clusters/{name}, eks.go), Pricing AWS JSON 1.1
// (X-Amz-Target: AWSPriceListService.<Action>, pricing.go).
var unbucketedTable = []actionSpec{
	{"CreateInstanceProfile", serviceIAM, hooksDefault, (*Simulator).createInstanceProfile},
	{"GetInstanceProfile", serviceIAM, hooksDefault, (*Simulator).getInstanceProfile},
	{"AddRoleToInstanceProfile", serviceIAM, hooksDefault, (*Simulator).addRoleToInstanceProfile},
	{"RemoveRoleFromInstanceProfile", serviceIAM, hooksDefault, (*Simulator).removeRoleFromInstanceProfile},
	{"DeleteInstanceProfile", serviceIAM, hooksDefault, (*Simulator).deleteInstanceProfile},
	{"TagInstanceProfile", serviceIAM, hooksDefault, (*Simulator).tagInstanceProfile},
	{"ListInstanceProfiles", serviceIAM, hooksDefault, (*Simulator).listInstanceProfiles},
	{"DescribeCluster", serviceEKS, hooksDefault, (*Simulator).describeCluster},
	{"GetProducts", servicePricing, hooksDefault, (*Simulator).getProducts},
}

var actionsByName = func() map[string]*actionSpec {
	m := make(map[string]*actionSpec, len(actionTable)+len(unbucketedTable))
	for i := range actionTable {
		m[actionTable[i].name] = &actionTable[i]
	}
	for i := range unbucketedTable {
		m[unbucketedTable[i].name] = &unbucketedTable[i]
	}
	return m
}()

func lookupAction(name string) *actionSpec { return actionsByName[name] }

// Actions returns the names of the EC2, SSM and SQS actions the simulator
// answers, in table order (IAMActions, EKS DescribeCluster and Pricing
// GetProducts are in unbucketedTable).
func Actions() []string {
	out := make([]string, 0, len(actionTable))
	for _, a := range actionTable {
		out = append(out, a.name)
	}
	return out
}

// isBare reports whether a call is "unfiltered and unpaginated": no filters,
// no ids or names, no MaxResults.
func isBare(p params) bool {
	for k := range p.values {
		switch k {
		case "Action", "Version", "DryRun":
		default:
			return false
		}
	}
	return true
}
