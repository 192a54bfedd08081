package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/autoscaler/operator"
)

// plantedSecret is in the userData of the EC2NodeClass of
// TestControllersLogWhatTheyDo; no log line or event may contain it.
const plantedSecret = "karpx-planted-secret-7d41c9e0"

// simSecretKey is the AWS secret access key startAutoscaler puts in the
// environment.
const simSecretKey = "karpx-simulator-secret"

// observedManifests is an EC2NodeClass whose userData holds plantedSecret
// and its NodePool of on-demand m5.large nodes for the pods labelled
// tier: observed.
func observedManifests(cluster string) string {
	return manifests(nodeClass{Name: "observed", UserData: "#!/bin/bash\nexport DB_PASSWORD=" + plantedSecret + "\necho \"custom bootstrap step\""}.yaml(cluster),
		nodePool{Name: "observed", Labels: map[string]string{"tier": "observed"}, InstanceTypes: []string{"m5.large"}, CapacityTypes: []string{onDemand}}.yaml())
}

// rawEC2 returns an SDK client of the simulator that bypasses karpx, as
// another tool of the account would call EC2.
func (e *env) rawEC2() *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(e.endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIAEXAMPLEKARPXSIM00", simSecretKey, ""),
		HTTPClient:   ec2apitest.LoopbackHTTP,
	})
}

// launchOrphan starts an instance tagged as karpx's, for NodePool
// nodePool, that no NodeClaim claims (a launch whose NodeClaim write was
// lost), and returns its id.
func (e *env) launchOrphan(nodePool string) string {
	e.t.Helper()
	raw := e.rawEC2()
	images, err := raw.DescribeImages(e.ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}})
	if err != nil || len(images.Images) == 0 {
		e.t.Fatalf("DescribeImages: %v (%d images)", err, len(images.Images))
	}
	var imageID string
	for _, img := range images.Images {
		if img.Architecture == ec2types.ArchitectureValuesX8664 {
			imageID = aws.ToString(img.ImageId)
			break
		}
	}
	out, err := raw.RunInstances(e.ctx, &ec2.RunInstancesInput{
		ImageId: aws.String(imageID), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		UserData: aws.String("IyEvYmluL2Jhc2gKIyBrYXJweC1zaW06IG5ldmVyLWpvaW4K"), // #!/bin/bash\n# karpx-sim: never-join
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(instance.ClusterTagKey(e.name)), Value: aws.String("owned")},
			{Key: aws.String(karpv1.NodePoolLabelKey), Value: aws.String(nodePool)},
		}}},
	})
	if err != nil {
		e.t.Fatalf("RunInstances: %v", err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// instanceState returns the simulator's state of instance id, "" if unknown.
func (e *env) instanceState(id string) string {
	for _, in := range e.sim.Instances() {
		if in.ID == id {
			return in.State
		}
	}
	return ""
}

// TestControllersLogWhatTheyDo: every component that acts says so, through
// the manager's logger, with the NodeClaim and NodePool names: the
// provisioner ("created NodeClaim"), the NodeClaim lifecycle ("launched"),
// the garbage collector ("terminated orphaned instance"). No line and no
// event contains the userData's content or the AWS credentials.
func TestControllersLogWhatTheyDo(t *testing.T) {
	logs := &logRecorder{}
	e := newEnvWith(t, "karpx-observed", envOptions{logs: logs, tweak: func(o *operator.Options) {
		o.GCPeriod = time.Second
		o.GCGrace = 2 * time.Second
	}})
	e.apply(observedManifests(e.name))
	dep := deployment("observed", 2, "1500m", "512Mi")
	dep.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "observed"}
	if err := e.kube.Create(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	e.eventually(90*time.Second, "2 pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "observed") == 2, nil
	})
	orphan := e.launchOrphan("observed")
	e.eventually(60*time.Second, "the orphaned instance terminated by garbage collection", func(context.Context) (bool, error) {
		s := e.instanceState(orphan)
		return s == "shutting-down" || s == "terminated" || s == "", nil
	})

	var claims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	claimNames := map[string]bool{}
	for _, nc := range claims.Items {
		claimNames[nc.Name] = true
	}
	for _, c := range []struct{ component, msg string }{
		{"provisioner", "created NodeClaim"},
		{"NodeClaim lifecycle", "launched"},
	} {
		found := 0
		for _, l := range logs.find(c.msg) {
			if claimNames[l.kv["NodeClaim"]] && l.kv["NodePool"] == "observed" {
				found++
			}
		}
		if found == 0 {
			t.Errorf("the %s acted (%d NodeClaims) but logged no %q line naming a NodeClaim and NodePool observed", c.component, len(claims.Items), c.msg)
		}
	}
	gc := logs.find("terminated orphaned instance")
	if len(gc) == 0 || !strings.HasSuffix(gc[0].kv["providerID"], "/"+orphan) ||
		gc[0].kv["NodePool"] != "observed" || !strings.Contains(gc[0].name, "garbagecollection") {
		t.Errorf("the garbage collector terminated %s but logged %+v, want a garbagecollection line naming the instance and NodePool observed", orphan, gc)
	}

	var events corev1.EventList
	if err := e.kube.List(e.ctx, &events); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{plantedSecret, simSecretKey, "export DB_PASSWORD"} {
		if hits := logs.grep(secret); len(hits) > 0 {
			t.Errorf("%d log lines contain %q, e.g. %s", len(hits), secret, hits[0])
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, secret) {
				t.Errorf("event %s/%s contains %q: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, secret, ev.Message)
			}
		}
	}
	scenarioLogf(t, "observability: %d log lines, %d NodeClaims, %d events, 0 containing the planted secret or credentials", logs.len(), len(claims.Items), len(events.Items))
}
