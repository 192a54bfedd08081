package ec2sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"
)

// addCR adds a reservation or fails the test.
func (e *testEnv) addCR(t *testing.T, cr CapacityReservation) string {
	t.Helper()
	id, err := e.sim.AddCapacityReservation(cr)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// describeCRs pages through DescribeCapacityReservations with the SDK's
// paginator and returns the reservations by id.
func (e *testEnv) describeCRs(t *testing.T, in *ec2.DescribeCapacityReservationsInput) map[string]types.CapacityReservation {
	t.Helper()
	out := map[string]types.CapacityReservation{}
	pager := ec2.NewDescribeCapacityReservationsPaginator(e.ec2, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, cr := range page.CapacityReservations {
			out[*cr.CapacityReservationId] = cr
		}
	}
	return out
}

// reservedLaunchTemplate creates a launch template as Karpenter's does for
// capacity type reserved (launchtemplate/types.go@v1.14.0): preference
// capacity-reservations-only, the reservation as target, market type
// capacity-block for a Capacity Block.
func (e *testEnv) reservedLaunchTemplate(t *testing.T, name, imageID, crID string, block bool) {
	t.Helper()
	data := &types.RequestLaunchTemplateData{ImageId: aws.String(imageID),
		CapacityReservationSpecification: &types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &types.CapacityReservationTarget{CapacityReservationId: aws.String(crID)}}}
	if block {
		data.InstanceMarketOptions = &types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: types.MarketTypeCapacityBlock}
	}
	if _, err := e.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name), LaunchTemplateData: data}); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeCapacityReservations(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk})
	ctx := context.Background()
	open := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 3,
		Tags: map[string]string{"team": "ml", "env": "prod"}})
	targeted := env.addCR(t, CapacityReservation{InstanceType: "c5.xlarge", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		InstanceMatchCriteria: MatchCriteriaTargeted, OwnerID: "210987654321", Tags: map[string]string{"team": "web"}})
	block := env.addCR(t, CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		ReservationType: ReservationTypeCapacityBlock, EndDate: t0.Add(24 * time.Hour), Tags: map[string]string{"team": "ml"}})
	shortLived := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1b", TotalInstanceCount: 1,
		EndDate: t0.Add(time.Hour)})
	future := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1c", TotalInstanceCount: 1,
		StartDate: t0.Add(48 * time.Hour)})
	clk.Step(2 * time.Hour)

	all := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{})
	if len(all) != 5 {
		t.Fatalf("want 5 reservations, got %d", len(all))
	}
	o := all[open]
	if *o.InstanceType != "m5.large" || *o.AvailabilityZone != "us-east-1a" || *o.TotalInstanceCount != 3 || *o.AvailableInstanceCount != 3 ||
		o.State != types.CapacityReservationStateActive || o.InstanceMatchCriteria != types.InstanceMatchCriteriaOpen ||
		o.ReservationType != types.CapacityReservationTypeDefault || *o.OwnerId != env.sim.cfg.AccountID || o.EndDate != nil ||
		o.EndDateType != types.EndDateTypeUnlimited || o.InstancePlatform != types.CapacityReservationInstancePlatformLinuxUnix ||
		!strings.HasSuffix(*o.CapacityReservationArn, ":capacity-reservation/"+open) || len(o.Tags) != 2 {
		t.Errorf("open ODCR: %+v", o)
	}
	b := all[block]
	if b.ReservationType != types.CapacityReservationTypeCapacityBlock || b.InstanceMatchCriteria != types.InstanceMatchCriteriaTargeted ||
		b.EndDate == nil || !b.EndDate.Equal(t0.Add(24*time.Hour)) || b.EndDateType != types.EndDateTypeLimited {
		t.Errorf("capacity block: %+v", b)
	}
	if s := all[shortLived]; s.State != types.CapacityReservationStateExpired || *s.AvailableInstanceCount != 0 {
		t.Errorf("expired ODCR: state %s available %d", s.State, *s.AvailableInstanceCount)
	}
	if f := all[future]; f.State != types.CapacityReservationStateScheduled || *f.AvailableInstanceCount != 0 {
		t.Errorf("future ODCR: state %s available %d", f.State, *f.AvailableInstanceCount)
	}

	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	for _, tc := range []struct {
		name string
		in   *ec2.DescribeCapacityReservationsInput
		want []string
	}{
		// The query Karpenter sends for a term with an id (capacityreservation/types.go@v1.14.0).
		{"id", &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{targeted}, Filters: []types.Filter{f("state", "active")}}, []string{targeted}},
		{"expired id, state active", &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{shortLived}, Filters: []types.Filter{f("state", "active")}}, nil},
		// ... and for a term with tags, owner and match criteria.
		{"tags", &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1000), Filters: []types.Filter{f("state", "active"), f("tag:team", "ml")}}, []string{open, block}},
		{"tag-key", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("tag-key", "env")}}, []string{open}},
		{"owner", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("owner-id", "210987654321")}}, []string{targeted}},
		{"match criteria", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("state", "active"), f("instance-match-criteria", "targeted")}}, []string{targeted, block}},
		{"zone and type", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("availability-zone", "us-east-1a"), f("instance-type", "m5.*")}}, []string{open}},
		{"end-date-type", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("end-date-type", "limited")}}, []string{block, shortLived}},
		// Pages of one, through the SDK's paginator.
		{"paged", &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1)}, []string{open, targeted, block, shortLived, future}},
	} {
		got := env.describeCRs(t, tc.in)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %d reservations, want %v", tc.name, len(got), tc.want)
			continue
		}
		for _, id := range tc.want {
			if _, ok := got[id]; !ok {
				t.Errorf("%s: %s missing", tc.name, id)
			}
		}
	}
	page, err := env.ec2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(2)})
	if err != nil || len(page.CapacityReservations) != 2 || page.NextToken == nil {
		t.Errorf("MaxResults 2: %v, %+v", err, page)
	}

	for _, tc := range []struct {
		name string
		in   *ec2.DescribeCapacityReservationsInput
		code string
	}{
		{"malformed id", &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-123"}}, "InvalidCapacityReservationId.Malformed"},
		{"unknown id", &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0123456789abcdef0"}}, "InvalidCapacityReservationId.NotFound"},
		{"ids with MaxResults", &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{open}, MaxResults: aws.Int32(10)}, CodeInvalidParameterCombination},
		{"MaxResults 0", &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(0)}, CodeInvalidParameterValue},
		{"MaxResults 1001", &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1001)}, CodeInvalidParameterValue},
		{"unknown filter", &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{f("reservation-kind", "x")}}, CodeInvalidParameterValue},
		{"bad token", &ec2.DescribeCapacityReservationsInput{NextToken: aws.String("nope")}, CodeInvalidPaginationToken},
	} {
		_, err := env.ec2.DescribeCapacityReservations(ctx, tc.in)
		if got := apiCode(t, err); got != tc.code {
			t.Errorf("%s: got %q (%v), want %s", tc.name, got, err, tc.code)
		}
	}
}

func TestAddCapacityReservationValidates(t *testing.T) {
	env := newTestEnv(t, Config{Clock: testingclock.NewFakeClock(t0)})
	for _, tc := range []struct {
		cr   CapacityReservation
		want string
	}{
		{CapacityReservation{InstanceType: "m9.nope", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1}, "instanceType"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "eu-west-1a", TotalInstanceCount: 1}, "availabilityZone"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a"}, "totalInstanceCount"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, ReservationType: "spot"}, "reservationType"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, InstanceMatchCriteria: "any"}, "instanceMatchCriteria"},
		{CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, ReservationType: ReservationTypeCapacityBlock}, "endDate"},
		{CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, ReservationType: ReservationTypeCapacityBlock,
			InstanceMatchCriteria: MatchCriteriaOpen, EndDate: t0.Add(time.Hour)}, "targeted"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, EndDate: t0.Add(-time.Hour)}, "endDate"},
		{CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, OwnerID: "me"}, "ownerId"},
		{CapacityReservation{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1}, "id"},
	} {
		if _, err := env.sim.AddCapacityReservation(tc.cr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %s", tc.cr, err, tc.want)
		}
	}
	id := env.addCR(t, CapacityReservation{ID: "cr-0123456789abcdef0", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	if _, err := env.sim.AddCapacityReservation(CapacityReservation{ID: id, InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1}); err == nil {
		t.Error("a duplicate id was accepted")
	}
	if got := env.sim.CapacityReservations(); len(got) != 1 {
		t.Errorf("refused definitions were kept: %+v", got)
	}
}

func TestCreateFleetTargetedReservationFillsUp(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk, PendingDelay: time.Second, ShuttingDownDelay: 2 * time.Second, TerminatedRetention: time.Hour})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	cr := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		InstanceMatchCriteria: MatchCriteriaTargeted, EndDate: t0.Add(time.Hour)})
	env.reservedLaunchTemplate(t, "reserved", ami, cr, false)

	// Karpenter's reserved launch: on-demand fleet, one override in the
	// reservation's type and zone (instance/types.go@v1.14.0).
	launch := func() *ec2.CreateFleetOutput {
		t.Helper()
		in := fleetInput("reserved", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a"))
		in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice}
		out, err := env.ec2.CreateFleet(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var ids []string
	for range 2 {
		out := launch()
		if len(out.Instances) != 1 || len(out.Errors) != 0 {
			t.Fatalf("launch into a reservation with room: %+v %+v", out.Instances, out.Errors)
		}
		ids = append(ids, out.Instances[0].InstanceIds...)
	}
	desc, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if err != nil {
		t.Fatal(err)
	}
	in := desc.Reservations[0].Instances[0]
	if aws.ToString(in.CapacityReservationId) != cr || in.CapacityReservationSpecification == nil ||
		in.CapacityReservationSpecification.CapacityReservationPreference != types.CapacityReservationPreference("capacity-reservations-only") ||
		aws.ToString(in.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId) != cr || in.InstanceLifecycle != "" {
		t.Fatalf("reserved instance: %+v", in)
	}
	if got := env.describeCRs(t, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{cr}})[cr]; *got.AvailableInstanceCount != 0 {
		t.Fatalf("available after 2 of 2: %d", *got.AvailableInstanceCount)
	}

	// Full: the pool fails with ReservationCapacityExceeded in the errorSet, nothing launches.
	out := launch()
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" ||
		*out.Errors[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone != "us-east-1a" {
		t.Fatalf("launch into a full reservation: %+v %+v", out.Instances, out.Errors)
	}

	// A terminated instance frees its place once it is terminated (not while shutting down).
	if _, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	if st := env.sim.CapacityReservations()[0]; st.AvailableInstanceCount != 0 || len(st.Instances) != 2 {
		t.Fatalf("shutting down: %+v", st)
	}
	clk.Step(3 * time.Second)
	if st := env.sim.CapacityReservations()[0]; st.AvailableInstanceCount != 1 || len(st.Instances) != 1 {
		t.Fatalf("terminated: %+v", st)
	}
	if out := launch(); len(out.Instances) != 1 {
		t.Fatalf("launch after a place freed: %+v", out.Errors)
	}

	// Expired: no launch, the same error; the instances keep running.
	clk.Step(time.Hour)
	if out := launch(); len(out.Instances) != 0 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
		t.Fatalf("launch into an expired reservation: %+v %+v", out.Instances, out.Errors)
	}
	if st := env.sim.CapacityReservations()[0]; st.State != ReservationStateExpired || len(st.Instances) != 2 {
		t.Fatalf("expired: %+v", st)
	}

	// A target of another type, and an unknown target.
	in2 := fleetInput("reserved", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.xlarge", "us-east-1a"))
	res, err := env.ec2.CreateFleet(ctx, in2)
	if err != nil || len(res.Errors) != 1 || aws.ToString(res.Errors[0].ErrorCode) != CodeInvalidParameterCombination {
		t.Fatalf("another instance type: %v %+v", err, res)
	}
	env.reservedLaunchTemplate(t, "unknown", ami, "cr-0123456789abcdef0", false)
	res, err = env.ec2.CreateFleet(ctx, fleetInput("unknown", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "us-east-1a")))
	if err != nil || len(res.Errors) != 1 || aws.ToString(res.Errors[0].ErrorCode) != "InvalidCapacityReservationId.NotFound" {
		t.Fatalf("unknown reservation: %v %+v", err, res)
	}
	// A malformed target is refused by CreateLaunchTemplate.
	_, err = env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("malformed"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami),
			CapacityReservationSpecification: &types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationTarget: &types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-x")}}}})
	if apiCode(t, err) != "InvalidCapacityReservationId.Malformed" {
		t.Fatalf("malformed target: %v", err)
	}
}

func TestCreateFleetOpenReservation(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	cr := env.addCR(t, CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
	env.launchTemplate(t, "plain", ami, "")
	_, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("none"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami),
			CapacityReservationSpecification: &types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationPreference: types.CapacityReservationPreferenceNone}}})
	if err != nil {
		t.Fatal(err)
	}
	launchIn := func(lt string, ct types.DefaultTargetCapacityType) string {
		t.Helper()
		out, err := env.ec2.CreateFleet(ctx, fleetInput(lt, ct, 1, nil, ov("m5.large", "us-east-1a")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("launch %s %s: %v %+v", lt, ct, err, out)
		}
		return env.sim.Instances()[len(env.sim.Instances())-1].CapacityReservationID
	}
	// Spot and preference none never use the open reservation.
	if got := launchIn("plain", types.DefaultTargetCapacityTypeSpot); got != "" {
		t.Errorf("spot launched into %s", got)
	}
	if got := launchIn("none", types.DefaultTargetCapacityTypeOnDemand); got != "" {
		t.Errorf("preference none launched into %s", got)
	}
	// An on-demand launch with the default preference fills it, then runs outside it.
	if got := launchIn("plain", types.DefaultTargetCapacityTypeOnDemand); got != cr {
		t.Errorf("first on-demand launch: reservation %q, want %s", got, cr)
	}
	if got := launchIn("plain", types.DefaultTargetCapacityTypeOnDemand); got != "" {
		t.Errorf("launch past a full open reservation went into %q", got)
	}
}

func TestCreateFleetCapacityBlock(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	env := newTestEnv(t, Config{Clock: clk})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	block := env.addCR(t, CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: ReservationTypeCapacityBlock, EndDate: t0.Add(24 * time.Hour)})
	env.reservedLaunchTemplate(t, "block", ami, block, true)
	// Karpenter's capacity-block launch: DefaultTargetCapacityType
	// capacity-block, no OnDemandOptions (instance/types.go@v1.14.0).
	out, err := env.ec2.CreateFleet(ctx, fleetInput("block", types.DefaultTargetCapacityTypeCapacityBlock, 1, nil, ov("p5.48xlarge", "us-east-1a")))
	if err != nil || len(out.Instances) != 1 || out.Instances[0].Lifecycle != types.InstanceLifecycleCapacityBlock {
		t.Fatalf("capacity-block launch: %v %+v", err, out)
	}
	desc, err := env.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
	if err != nil {
		t.Fatal(err)
	}
	if in := desc.Reservations[0].Instances[0]; in.InstanceLifecycle != types.InstanceLifecycleTypeCapacityBlock || aws.ToString(in.CapacityReservationId) != block {
		t.Fatalf("capacity-block instance: lifecycle %q reservation %q", in.InstanceLifecycle, aws.ToString(in.CapacityReservationId))
	}
	out, err = env.ec2.CreateFleet(ctx, fleetInput("block", types.DefaultTargetCapacityTypeCapacityBlock, 1, nil, ov("p5.48xlarge", "us-east-1a")))
	if err != nil || len(out.Instances) != 0 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
		t.Fatalf("full capacity block: %v %+v", err, out)
	}
	// A capacity block launched as plain on-demand is refused.
	env.reservedLaunchTemplate(t, "block-as-odcr", ami, block, false)
	out, err = env.ec2.CreateFleet(ctx, fleetInput("block-as-odcr", types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("p5.48xlarge", "us-east-1a")))
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != CodeInvalidParameterCombination {
		t.Fatalf("capacity block as on-demand: %v %+v", err, out)
	}
}

func TestCapacityReservationAdmin(t *testing.T) {
	env := newTestEnv(t, Config{Clock: testingclock.NewFakeClock(t0)})
	post := func(body string) *http.Response {
		t.Helper()
		resp, err := http.Post(env.endpoint+"/_sim/capacity-reservations", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"instanceType":"m5.large","availabilityZone":"us-east-1a","totalInstanceCount":2,"tags":{"team":"ml"}}`)
	var created map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusCreated || !reCRID.MatchString(created["id"]) {
		t.Fatalf("POST: %d %v %v", resp.StatusCode, created, err)
	}
	_ = resp.Body.Close()
	resp = post(`{"instanceType":"m5.large","availabilityZone":"us-east-1a","totalInstanceCount":0}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("POST of a bad definition: %d", resp.StatusCode)
	}
	_ = resp.Body.Close()
	resp, err := http.Get(env.endpoint + "/_sim/capacity-reservations")
	if err != nil {
		t.Fatal(err)
	}
	var list []CapacityReservationStatus
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list) != 1 || list[0].State != ReservationStateActive || list[0].AvailableInstanceCount != 2 {
		t.Fatalf("GET: %+v %v", list, err)
	}
	_ = resp.Body.Close()
	req, _ := http.NewRequest(http.MethodDelete, env.endpoint+"/_sim/capacity-reservations?id="+created["id"], nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if st := env.sim.CapacityReservations()[0]; st.State != ReservationStateCancelled || st.AvailableInstanceCount != 0 {
		t.Fatalf("cancelled: %+v", st)
	}
	if err := env.sim.CancelCapacityReservation("cr-0123456789abcdef0"); !errors.Is(err, ErrUnknownCapacityReservation) {
		t.Fatalf("cancel unknown: %v", err)
	}
}
