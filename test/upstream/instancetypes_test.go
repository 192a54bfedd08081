package upstream

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	kwokoptions "sigs.k8s.io/karpenter/kwok/options"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

// simOffering is one (instance type, zone, capacity type) as the simulator
// answers it over the EC2 API.
type simOffering struct{ instanceType, zone, capacityType string }

// servedOfferings asks a running simulator, through the EC2 API as karpx's
// instance-type provider does, for every (type, zone, capacity type) it
// offers and its hourly price: offerings from DescribeInstanceTypeOfferings
// (availability-zone), spot prices from DescribeSpotPriceHistory (Linux/UNIX),
// on-demand prices from the catalogue (ec2sim has no pricing API; CreateFleet
// ranks on-demand pools by the catalogue price and karpx prices them so).
func servedOfferings(t *testing.T, sim *ec2sim.Simulator) map[simOffering]float64 {
	t.Helper()
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	client := ec2.New(ec2.Options{Region: sim.Config().Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), HTTPClient: ec2apitest.LoopbackHTTP})
	ctx := context.Background()
	offered := map[[2]string]bool{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(client, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("DescribeInstanceTypeOfferings: %v", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			offered[[2]string{string(o.InstanceType), aws.ToString(o.Location)}] = true
		}
	}
	out := map[simOffering]float64{}
	spots := ec2.NewDescribeSpotPriceHistoryPaginator(client, &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux/UNIX"}})
	for spots.HasMorePages() {
		page, err := spots.NextPage(ctx)
		if err != nil {
			t.Fatalf("DescribeSpotPriceHistory: %v", err)
		}
		for _, sp := range page.SpotPriceHistory {
			p, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				t.Fatalf("spot price %q: %v", aws.ToString(sp.SpotPrice), err)
			}
			key := [2]string{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			if !offered[key] {
				t.Fatalf("spot price for %v, which DescribeInstanceTypeOfferings does not offer", key)
			}
			out[simOffering{key[0], key[1], karpv1.CapacityTypeSpot}] = p
		}
	}
	for key := range offered {
		it, _ := catalog.Get(key[0])
		if it.OnDemandPriceUSDPerHour != nil {
			out[simOffering{key[0], key[1], karpv1.CapacityTypeOnDemand}] = *it.OnDemandPriceUSDPerHour
		}
	}
	return out
}

// TestInstanceTypesMatchSimulator: the generated file, read by Karpenter's
// own kwok loader (ConstructInstanceTypes with --instance-types-file-path),
// has exactly the (type, zone, capacity type) offerings and prices a
// running ec2sim serves, in a region and zones other than the defaults and
// with types missing from some zones, and Karpenter's allocatable is the
// catalogue's.
func TestInstanceTypesMatchSimulator(t *testing.T) {
	cfg := ec2sim.Config{
		Region: "eu-west-1",
		Zones:  []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"},
		// m5 is not offered in eu-west-1c, c5.large not in eu-west-1a.
		Offered: func(it, zone string) bool {
			return !(zone == "eu-west-1c" && strings.HasPrefix(it, "m5.")) && !(zone == "eu-west-1a" && it == "c5.large")
		},
		Throttle: ec2sim.ThrottleConfig{Disabled: true},
	}
	sim, err := ec2sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := servedOfferings(t, sim)

	path := filepath.Join(t.TempDir(), "instance-types.json")
	labels := []string{catalog.LabelInstanceCategory, catalog.LabelInstanceFamily}
	if err := WriteInstanceTypes(path, cfg, labels...); err != nil {
		t.Fatal(err)
	}
	ctx := kwokoptions.ToContext(context.Background(), &kwokoptions.Options{InstanceTypesFilePath: path})
	its, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		t.Fatalf("Karpenter's kwok provider cannot read the file: %v", err)
	}

	got := map[simOffering]float64{}
	for _, it := range its {
		cat, ok := catalog.Get(it.Name)
		if !ok {
			t.Errorf("instance type %s is not in the catalogue", it.Name)
			continue
		}
		for _, o := range it.Offerings {
			key := simOffering{it.Name, o.Zone(), o.CapacityType()}
			if _, dup := got[key]; dup {
				t.Errorf("offering %v twice", key)
			}
			got[key] = o.Price
			for _, l := range labels {
				if v := o.Requirements.Get(l).Any(); v != cat.Labels[l] {
					t.Errorf("%v: requirement %s = %q, catalogue %q", key, l, v, cat.Labels[l])
				}
			}
		}
		alloc := it.Allocatable()
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
			if q, w := alloc[name], cat.Allocatable[name]; q.Cmp(w) != 0 {
				t.Errorf("%s: Karpenter's allocatable %s = %s, catalogue (ec2sim's Node) %s", it.Name, name, q.String(), w.String())
			}
		}
		if a := it.Requirements.Get(corev1.LabelArchStable).Any(); a != cat.Arch() {
			t.Errorf("%s: arch %s, catalogue %s", it.Name, a, cat.Arch())
		}
	}
	if len(got) == 0 {
		t.Fatal("no offerings generated")
	}
	missing, extra, priced := 0, 0, 0
	for key, p := range want {
		g, ok := got[key]
		switch {
		case !ok:
			missing++
			if missing <= 5 {
				t.Errorf("ec2sim serves %v at $%.6f/h; the generated file lacks it", key, p)
			}
		case math.Abs(g-p) > 1e-9:
			priced++
			if priced <= 5 {
				t.Errorf("%v: generated $%.9f/h, ec2sim serves $%.9f/h", key, g, p)
			}
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			extra++
			if extra <= 5 {
				t.Errorf("generated %v, which ec2sim does not serve", key)
			}
		}
	}
	if missing+extra+priced > 0 {
		t.Errorf("%d offerings missing, %d extra, %d priced differently (of %d ec2sim serves)", missing, extra, priced, len(want))
	}
	for _, key := range []simOffering{{"m5.large", "eu-west-1c", karpv1.CapacityTypeOnDemand}, {"c5.large", "eu-west-1a", karpv1.CapacityTypeSpot}} {
		if _, ok := got[key]; ok {
			t.Errorf("%v generated although ec2sim does not offer it", key)
		}
	}
	t.Logf("%d instance types, %d offerings, as ec2sim serves them", len(its), len(got))
}

// TestInstanceTypesErrors: labels the generator cannot carry and an invalid
// simulator configuration are refused, naming the field.
func TestInstanceTypesErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg    ec2sim.Config
		labels []string
		want   string
	}{
		{labels: []string{"karpenter.k8s.aws/instance-colour"}, want: `label "karpenter.k8s.aws/instance-colour" is not a catalogue label`},
		{labels: []string{corev1.LabelArchStable}, want: `label "kubernetes.io/arch": Karpenter's kwok provider sets it itself`},
		{cfg: ec2sim.Config{Region: "us-east-1", Zones: []string{"eu-west-1a"}}, want: `zone "eu-west-1a" is not in region "us-east-1"`},
	} {
		t.Run(fmt.Sprint(tc.labels, tc.cfg.Zones), func(t *testing.T) {
			_, err := InstanceTypes(tc.cfg, tc.labels...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("InstanceTypes: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRequirementLabels: only catalogue labels of NodePool requirements,
// not the ones Karpenter's kwok provider derives itself or well-known ones.
func TestRequirementLabels(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: catalog.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}},
		{Key: catalog.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
		{Key: catalog.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
	}
	np2 := np.DeepCopy()
	np2.Spec.Template.Spec.Requirements = append(np2.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: catalog.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	got := RequirementLabels(np, np2)
	want := []string{catalog.LabelInstanceCategory, catalog.LabelInstanceCPU, catalog.LabelInstanceGPUCount}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RequirementLabels = %v, want %v", got, want)
	}
}
