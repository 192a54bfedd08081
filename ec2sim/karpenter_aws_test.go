package ec2sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpx/karpx/catalog"
)

// The calls of Karpenter's AWS provider (v1.14) that the simulator answers
// besides karpx's own: EKS DescribeCluster, EC2 DescribeInstanceStatus,
// DescribeSpotPriceHistory with MaxResults 2000, IAM ListInstanceProfiles
// and Pricing GetProducts, each through the real SDK client.

func (e *testEnv) eksClient() *eks.Client {
	return eks.NewFromConfig(awsConfig(), func(o *eks.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.Retryer = newRetryer(1)
	})
}

// pricingClient is built as Karpenter's pricing.NewAPI builds it: the
// region is us-east-1, the Price List API's endpoint region.
func (e *testEnv) pricingClient() *pricing.Client {
	cfg := awsConfig()
	cfg.Region = "us-east-1"
	return pricing.NewFromConfig(cfg, func(o *pricing.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.Retryer = newRetryer(1)
	})
}

// TestDescribeClusterAnswersTheSimulatedCluster: the cluster's endpoint,
// CA, version, status and service CIDR (what Karpenter reads for AL2023's
// NodeConfig); ResourceNotFoundException (404) for another name; an
// injected fault reaches the EKS client as its code.
func TestDescribeClusterAnswersTheSimulatedCluster(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	env := newTestEnv(t, Config{ClusterName: "demo", ClusterEndpoint: "https://127.0.0.1:6443", ClusterCA: ca, KubernetesVersion: "1.34"})
	ctx := context.Background()
	out, err := env.eksClient().DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("demo")})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Cluster
	if aws.ToString(c.Name) != "demo" || aws.ToString(c.Endpoint) != "https://127.0.0.1:6443" || aws.ToString(c.Version) != "1.34" ||
		c.Status != ekstypes.ClusterStatusActive || aws.ToString(c.Arn) != "arn:aws:eks:us-east-1:123456789012:cluster/demo" {
		t.Fatalf("cluster %+v", c)
	}
	if c.KubernetesNetworkConfig == nil || aws.ToString(c.KubernetesNetworkConfig.ServiceIpv4Cidr) != "172.20.0.0/16" ||
		c.KubernetesNetworkConfig.IpFamily != ekstypes.IpFamilyIpv4 {
		t.Fatalf("network config %+v", c.KubernetesNetworkConfig)
	}
	if got, _ := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data)); string(got) != string(ca) {
		t.Fatalf("CA %q", got)
	}
	if c.ResourcesVpcConfig == nil || len(c.ResourcesVpcConfig.SubnetIds) != 3 || c.CreatedAt == nil || c.CreatedAt.IsZero() {
		t.Fatalf("vpc config %+v createdAt %v", c.ResourcesVpcConfig, c.CreatedAt)
	}

	_, err = env.eksClient().DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("other")})
	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) || !strings.Contains(nf.ErrorMessage(), "other") {
		t.Fatalf("other cluster: %v", err)
	}
	apiErr(t, err, "ResourceNotFoundException", http.StatusNotFound)

	env.sim.Faults().FailNext("DescribeCluster", "ServerException", 1)
	_, err = env.eksClient().DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("demo")})
	apiErr(t, err, "ServerException", 0)
	if st := env.sim.Stats()["DescribeCluster"]; st.Requests != 3 || st.Errors != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDescribeClusterRejectsABadServiceCIDR: Config.ServiceIPv4CIDR must be
// an IPv4 block.
func TestDescribeClusterRejectsABadServiceCIDR(t *testing.T) {
	for _, cidr := range []string{"10.0.0.0", "fd00::/108", "x"} {
		if _, err := New(Config{ServiceIPv4CIDR: cidr}); err == nil || !strings.Contains(err.Error(), "ServiceIPv4CIDR") {
			t.Errorf("ServiceIPv4CIDR %q: %v", cidr, err)
		}
	}
}

// TestEKSAndEC2ShareThePort: routing by the SigV4 scope sends EKS's GET
// to EKS and EC2's form to EC2 on the same endpoint; an EKS path that is
// no operation is UnknownOperationException.
func TestEKSAndEC2ShareThePort(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	if _, err := env.eksClient().DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("karpx")}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatal(err)
	}
	_, err := env.eksClient().ListClusters(ctx, &eks.ListClustersInput{})
	apiErr(t, err, "UnknownOperationException", http.StatusNotFound)
}

// TestDescribeInstanceStatus: running instances pass both checks;
// IncludeAllInstances adds the others as not-applicable; FailStatusChecks
// makes a check impaired with impairedSince, which Karpenter's filters
// (instance-status.status, system-status.status = impaired) select; the
// paginator pages with MaxResults; bad input gets EC2's errors.
func TestDescribeInstanceStatus(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second})
	ctx := context.Background()
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("nodes", types.DefaultTargetCapacityTypeOnDemand, 7, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	ids := out.Instances[0].InstanceIds

	statuses := func(in *ec2.DescribeInstanceStatusInput) []types.InstanceStatus {
		t.Helper()
		var all []types.InstanceStatus
		pages := 0
		for p := ec2.NewDescribeInstanceStatusPaginator(env.ec2, in); p.HasMorePages(); pages++ {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.InstanceStatuses...)
		}
		if in.MaxResults != nil && pages < len(all)/int(*in.MaxResults) {
			t.Fatalf("%d statuses in %d pages of %d", len(all), pages, *in.MaxResults)
		}
		return all
	}
	if got := statuses(&ec2.DescribeInstanceStatusInput{}); len(got) != 0 {
		t.Fatalf("pending instances listed without IncludeAllInstances: %+v", got)
	}
	pending := statuses(&ec2.DescribeInstanceStatusInput{IncludeAllInstances: aws.Bool(true)})
	if len(pending) != 7 || pending[0].InstanceState.Name != types.InstanceStateNamePending ||
		pending[0].InstanceStatus.Status != types.SummaryStatusNotApplicable || pending[0].SystemStatus.Status != types.SummaryStatusNotApplicable {
		t.Fatalf("pending %+v", pending)
	}

	clk.Step(time.Second)
	running := statuses(&ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(5)})
	if len(running) != 7 {
		t.Fatalf("%d running statuses", len(running))
	}
	r := running[0]
	if r.InstanceStatus.Status != types.SummaryStatusOk || r.SystemStatus.Status != types.SummaryStatusOk ||
		len(r.InstanceStatus.Details) != 1 || r.InstanceStatus.Details[0].Status != types.StatusTypePassed ||
		r.InstanceStatus.Details[0].Name != types.StatusNameReachability || aws.ToString(r.AvailabilityZone) != "us-east-1a" ||
		aws.ToString(r.AvailabilityZoneId) != "use1-az1" || *r.InstanceState.Code != 16 {
		t.Fatalf("running status %+v", r)
	}

	impaired := func(filter string) []types.InstanceStatus {
		return statuses(&ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String(filter), Values: []string{"impaired"}}}})
	}
	if got := impaired("instance-status.status"); len(got) != 0 {
		t.Fatalf("impaired before the fault: %+v", got)
	}
	failedAt := clk.Now()
	if err := env.sim.FailStatusChecks(StatusCheckFault{InstanceIDs: ids[:1], Instance: true}); err != nil {
		t.Fatal(err)
	}
	if err := env.sim.FailStatusChecks(StatusCheckFault{InstanceIDs: ids[1:2], System: true}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	got := impaired("instance-status.status")
	if len(got) != 1 || aws.ToString(got[0].InstanceId) != ids[0] || got[0].SystemStatus.Status != types.SummaryStatusOk {
		t.Fatalf("instance-status impaired %+v", got)
	}
	d := got[0].InstanceStatus.Details[0]
	if d.Status != types.StatusTypeFailed || d.ImpairedSince == nil || !d.ImpairedSince.Equal(failedAt) {
		t.Fatalf("detail %+v", d)
	}
	if got := impaired("system-status.status"); len(got) != 1 || aws.ToString(got[0].InstanceId) != ids[1] {
		t.Fatalf("system-status impaired %+v", got)
	}
	if got := statuses(&ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String("event.code"), Values: []string{"instance-retirement"}}}}); len(got) != 0 {
		t.Fatalf("events %+v", got)
	}
	if got := statuses(&ec2.DescribeInstanceStatusInput{InstanceIds: ids[:2], Filters: []types.Filter{{Name: aws.String("instance-status.reachability"), Values: []string{"failed"}}}}); len(got) != 1 {
		t.Fatalf("by id and reachability %+v", got)
	}
	env.sim.ClearStatusChecks(ids[0])
	if got := impaired("instance-status.status"); len(got) != 0 {
		t.Fatalf("impaired after clearing: %+v", got)
	}
	if code, body := httpDo(t, http.MethodPost, env.endpoint+"/_sim/status-checks", `{"instanceIds":["`+ids[2]+`"],"instance":true}`); code != http.StatusNoContent {
		t.Fatalf("POST status-checks %d %s", code, body)
	}
	if got := impaired("instance-status.status"); len(got) != 1 || aws.ToString(got[0].InstanceId) != ids[2] {
		t.Fatalf("after POST: %+v", got)
	}
	if code, _ := httpDo(t, http.MethodPost, env.endpoint+"/_sim/status-checks", `{"instanceIds":["i-0123456789abcdef0"],"system":true}`); code != http.StatusNotFound {
		t.Fatalf("unknown instance: %d", code)
	}
	if code, _ := httpDo(t, http.MethodPost, env.endpoint+"/_sim/status-checks", `{"instanceIds":["`+ids[2]+`"]}`); code != http.StatusBadRequest {
		t.Fatalf("no check named: %d", code)
	}
	if code, _ := httpDo(t, http.MethodDelete, env.endpoint+"/_sim/status-checks", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if got := impaired("system-status.status"); len(got) != 0 {
		t.Fatalf("impaired after DELETE: %+v", got)
	}

	_, err = env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(4)})
	apiErr(t, err, CodeInvalidParameterValue, http.StatusBadRequest)
	_, err = env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(10), InstanceIds: ids[:1]})
	apiErr(t, err, CodeInvalidParameterCombination, http.StatusBadRequest)
	_, err = env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String("no-such-filter"), Values: []string{"x"}}}})
	apiErr(t, err, CodeInvalidParameterValue, http.StatusBadRequest)
	_, err = env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{"i-0000000000000dead"}})
	apiErr(t, err, "InvalidInstanceID.NotFound", http.StatusBadRequest)
	many := make([]string, 101)
	for i := range many {
		many[i] = ids[0]
	}
	_, err = env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: many})
	apiErr(t, err, "InvalidRequest", http.StatusBadRequest)
	if err := env.sim.FailStatusChecks(StatusCheckFault{InstanceIDs: []string{"i-0000000000000dead"}, Instance: true}); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("unknown instance: %v", err)
	}
}

// TestSpotPriceHistoryTakesKarpentersPageSize: MaxResults 2000, which
// Karpenter's AWS provider sends, is a page size; only a non-positive
// value is refused.
func TestSpotPriceHistoryTakesKarpentersPageSize(t *testing.T) {
	env := newTestEnv(t, Config{})
	ctx := context.Background()
	in := &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime: aws.Time(time.Now()), MaxResults: aws.Int32(2000)}
	first, err := env.ec2.DescribeSpotPriceHistory(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.SpotPriceHistory) != 2000 || aws.ToString(first.NextToken) == "" {
		t.Fatalf("first page: %d prices, token %q", len(first.SpotPriceHistory), aws.ToString(first.NextToken))
	}
	total := 0
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(env.ec2, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += len(page.SpotPriceHistory)
	}
	priced := 0
	for _, it := range catalog.All() {
		if it.OnDemandPriceUSDPerHour != nil {
			priced++
		}
	}
	if want := priced * 3 * 2; total != want {
		t.Fatalf("%d prices, want %d (priced types × zones × products)", total, want)
	}
	_, err = env.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{MaxResults: aws.Int32(0)})
	apiErr(t, err, CodeInvalidParameterValue, http.StatusBadRequest)
}

// TestListInstanceProfilesByPathPrefix: the profiles below a path prefix,
// by name, in pages of MaxItems with IsTruncated and Marker, without
// tags; MaxItems out of 1–1000 and a bad prefix are ValidationError.
func TestListInstanceProfilesByPathPrefix(t *testing.T) {
	env := newTestEnv(t, Config{})
	c := env.iamClient()
	ctx := context.Background()
	for i, path := range []string{"/karpenter/us-east-1/demo/uid-a/", "/karpenter/us-east-1/demo/uid-b/", "/karpenter/us-east-1/other/", "/"} {
		for j := range 2 {
			_, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("p" + strconv.Itoa(i) + strconv.Itoa(j)),
				Path: aws.String(path), Tags: []iamtypes.Tag{{Key: aws.String("karpenter.sh/managed-by"), Value: aws.String("demo")}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var names []string
	pages := 0
	for p := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/karpenter/us-east-1/demo/"), MaxItems: aws.Int32(3)}); p.HasMorePages(); pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range page.InstanceProfiles {
			names = append(names, aws.ToString(ip.InstanceProfileName))
			if len(ip.Tags) != 0 {
				t.Errorf("%s listed with tags", *ip.InstanceProfileName)
			}
		}
	}
	if strings.Join(names, ",") != "p00,p01,p10,p11" || pages != 2 {
		t.Fatalf("names %v in %d pages", names, pages)
	}
	all, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil || len(all.InstanceProfiles) != 8 || all.IsTruncated {
		t.Fatalf("all: %v %+v", err, all)
	}
	_, err = c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(1001)})
	if apiCode(t, err) != "ValidationError" {
		t.Fatalf("MaxItems 1001: %v", err)
	}
	_, err = c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("karpenter")})
	if apiCode(t, err) != "ValidationError" {
		t.Fatalf("prefix without slash: %v", err)
	}
}

// TestGetProductsAsKarpenterAsksForThem: Karpenter's two on-demand queries
// (shared-tenancy "Compute Instance", dedicated "Compute Instance (bare
// metal)") page through the catalogue's prices in price-list items that
// Karpenter's parser reads; limits are the API's.
func TestGetProductsAsKarpenterAsksForThem(t *testing.T) {
	env := newTestEnv(t, Config{})
	c := env.pricingClient()
	ctx := context.Background()
	query := func(tenancy, family string) map[string]float64 {
		t.Helper()
		in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100), Filters: []pricingtypes.Filter{
			{Field: aws.String("regionCode"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("us-east-1")},
			{Field: aws.String("serviceCode"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("AmazonEC2")},
			{Field: aws.String("preInstalledSw"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("NA")},
			{Field: aws.String("operatingSystem"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("Linux")},
			{Field: aws.String("capacitystatus"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("Used")},
			{Field: aws.String("marketoption"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("OnDemand")},
			{Field: aws.String("tenancy"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(tenancy)},
			{Field: aws.String("productFamily"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(family)},
		}}
		prices := map[string]float64{}
		for p := pricing.NewGetProductsPaginator(c, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.PriceList) > 100 {
				t.Fatalf("page of %d", len(page.PriceList))
			}
			for _, doc := range page.PriceList {
				// The fields Karpenter's onDemandPage reads.
				var item struct {
					Product struct{ Attributes struct{ InstanceType string } }
					Terms   struct {
						OnDemand map[string]struct {
							PriceDimensions map[string]struct{ PricePerUnit map[string]string }
						}
					}
				}
				if err := json.Unmarshal([]byte(doc), &item); err != nil {
					t.Fatal(err)
				}
				for _, term := range item.Terms.OnDemand {
					for _, dim := range term.PriceDimensions {
						v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
						if err != nil {
							t.Fatal(err)
						}
						prices[item.Product.Attributes.InstanceType] = v
					}
				}
			}
		}
		return prices
	}
	shared := query("Shared", "Compute Instance")
	metal := query("Dedicated", "Compute Instance (bare metal)")
	m5, _ := catalog.Get("m5.large")
	if shared["m5.large"] != *m5.OnDemandPriceUSDPerHour || len(shared) < 1000 {
		t.Fatalf("%d shared prices, m5.large %v want %v", len(shared), shared["m5.large"], *m5.OnDemandPriceUSDPerHour)
	}
	if _, ok := shared["m5.metal"]; ok || len(metal) == 0 {
		t.Fatalf("metal among shared, or no metal prices (%d)", len(metal))
	}
	for name := range metal {
		if !strings.Contains(name, "metal") {
			t.Fatalf("%s among bare metal", name)
		}
	}

	_, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)})
	var inv *pricingtypes.InvalidParameterException
	if !errors.As(err, &inv) {
		t.Fatalf("MaxResults 101: %v", err)
	}
	_, err = c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("garbage")})
	var bad *pricingtypes.InvalidNextTokenException
	if !errors.As(err, &bad) {
		t.Fatalf("bad token: %v", err)
	}
	other, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonS3")})
	if err != nil || len(other.PriceList) != 0 {
		t.Fatalf("AmazonS3: %v %v", err, other)
	}
}

// TestDescribeInstanceStatusListsScheduledEvents: a retirement or reboot
// maintenance that Interrupt announced is a scheduled event of the
// instance, which Karpenter's event.code filter selects.
func TestDescribeInstanceStatusListsScheduledEvents(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second})
	ctx := context.Background()
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), "")
	out, err := env.ec2.CreateFleet(ctx, fleetInput("nodes", types.DefaultTargetCapacityTypeOnDemand, 3, nil, ov("m5.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	ids := out.Instances[0].InstanceIds
	clk.Step(time.Second)
	if _, err := env.sim.Interrupt(InterruptionRetirement, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := env.sim.Interrupt(InterruptionMaintenance, ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := env.ec2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String("event.code"),
		Values: []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}}}})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]types.EventCode{}
	for _, st := range got.InstanceStatuses {
		if len(st.Events) != 1 {
			t.Fatalf("%s: events %+v", *st.InstanceId, st.Events)
		}
		e := st.Events[0]
		if e.NotBefore == nil || !e.NotBefore.Equal(t0.Add(time.Second+14*24*time.Hour)) || e.NotAfter == nil || !strings.HasPrefix(aws.ToString(e.InstanceEventId), "instance-event-") {
			t.Fatalf("event %+v", e)
		}
		codes[*st.InstanceId] = e.Code
	}
	if len(codes) != 2 || codes[ids[0]] != types.EventCodeInstanceRetirement || codes[ids[1]] != types.EventCodeInstanceReboot {
		t.Fatalf("codes %v", codes)
	}
}
