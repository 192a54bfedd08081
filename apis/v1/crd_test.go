package v1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/lint/crdschema"
	"github.com/karpx/karpx/manifests/crds"
)

// The CRD tests apply objects to a real kube-apiserver (envtest) that
// serves manifests/crds/karpenter.k8s.aws_ec2nodeclasses.yaml and
// Karpenter's NodePool CRDs: each validation rule of upstream's
// EC2NodeClass CRD must reject its failing case with its message, and
// every shared Karpenter example must be accepted. Each case also runs
// through kubectl karpx lint's offline validation (lint/crdschema), which
// must reject it with the API server's own words.

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd")
	}
	root := repoRoot(t)
	bin := filepath.Join(root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Skipf("bin/%s not found: run make controlplane", b)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDs:                  karpapis.CRDs,
		CRDDirectoryPaths:     []string{filepath.Join(root, "manifests", "crds", "karpenter.k8s.aws_ec2nodeclasses.yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const validClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: base
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
  - alias: al2023@latest
  subnetSelectorTerms:
  - tags: {karpenter.sh/discovery: test}
  securityGroupSelectorTerms:
  - tags: {karpenter.sh/discovery: test}
`

// crdCase is one rule's failing case: a change to validClass's spec and a
// substring of the message the API server must return.
type crdCase struct {
	name   string
	spec   string // YAML merged over validClass's spec; null deletes
	reject string
}

var crdCases = []crdCase{
	{"role and instanceProfile together", `{instanceProfile: KarpenterProfile}`, "must specify exactly one of ['role', 'instanceProfile']"},
	{"neither role nor instanceProfile", `{role: null}`, "must specify exactly one of ['role', 'instanceProfile']"},
	{"empty role", `{role: ""}`, "role cannot be empty"},
	{"empty instanceProfile", `{role: null, instanceProfile: ""}`, "instanceProfile cannot be empty"},
	{"no amiFamily without alias", `{amiSelectorTerms: [{id: ami-123}]}`, "must specify amiFamily if amiSelectorTerms does not contain an alias"},
	{"amiFamily AL2 with AL2023 alias", `{amiFamily: AL2}`, "amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
	{"amiFamily AL2023 with AL2 alias", `{amiFamily: AL2023, amiSelectorTerms: [{alias: al2@latest}]}`, "amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
	{"amiFamily AL2 with Bottlerocket alias", `{amiFamily: AL2, amiSelectorTerms: [{alias: bottlerocket@latest}]}`, "amiFamily must be 'Bottlerocket' or 'Custom'"},
	{"amiFamily AL2 with Windows2019 alias", `{amiFamily: AL2, amiSelectorTerms: [{alias: windows2019@latest}]}`, "amiFamily must be 'Windows2019' or 'Custom'"},
	{"amiFamily AL2 with Windows2022 alias", `{amiFamily: AL2, amiSelectorTerms: [{alias: windows2022@latest}]}`, "amiFamily must be 'Windows2022' or 'Custom'"},
	{"amiFamily AL2 with Windows2025 alias", `{amiFamily: AL2, amiSelectorTerms: [{alias: windows2025@latest}]}`, "amiFamily must be 'Windows2025' or 'Custom'"},
	{"empty ami selector term", `{amiSelectorTerms: [{}]}`, "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
	{"ami id with tags", `{amiFamily: AL2023, amiSelectorTerms: [{id: ami-123, tags: {a: b}}]}`, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{"alias with name", `{amiSelectorTerms: [{alias: al2023@latest, name: my-ami}]}`, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{"alias with another term", `{amiSelectorTerms: [{alias: al2023@latest}, {name: my-ami}]}`, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
	{"alias without version", `{amiSelectorTerms: [{alias: al2023}]}`, "'alias' is improperly formatted, must match the format 'family@version'"},
	{"alias of unknown family", `{amiSelectorTerms: [{alias: ubuntu@latest}]}`, "family is not supported"},
	{"pinned windows alias", `{amiSelectorTerms: [{alias: windows2022@v20240101}]}`, "windows families may only specify version 'latest'"},
	{"empty ami tag value", `{amiFamily: AL2023, amiSelectorTerms: [{tags: {a: ""}}]}`, "empty tag keys or values aren't supported"},
	{"no subnet terms", `{subnetSelectorTerms: []}`, "subnetSelectorTerms cannot be empty"},
	{"empty subnet term", `{subnetSelectorTerms: [{}]}`, "expected at least one, got none, ['tags', 'id']"},
	{"subnet id with tags", `{subnetSelectorTerms: [{id: subnet-123, tags: {a: b}}]}`, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
	{"empty subnet tag key", `{subnetSelectorTerms: [{tags: {"": b}}]}`, "empty tag keys or values aren't supported"},
	{"no security group terms", `{securityGroupSelectorTerms: []}`, "securityGroupSelectorTerms cannot be empty"},
	{"empty security group term", `{securityGroupSelectorTerms: [{}]}`, "expected at least one, got none, ['tags', 'id', 'name']"},
	{"security group id with name", `{securityGroupSelectorTerms: [{id: sg-123, tags: {a: b}}]}`, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
	{"security group name with tags", `{securityGroupSelectorTerms: [{name: web, tags: {a: b}}]}`, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
	{"empty capacity reservation term", `{capacityReservationSelectorTerms: [{}]}`, "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
	{"capacity reservation id with match criteria", `{capacityReservationSelectorTerms: [{id: cr-123, instanceMatchCriteria: open}]}`, "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
	{"capacity reservation id with owner", `{capacityReservationSelectorTerms: [{id: cr-123, ownerID: "123456789012"}]}`, "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
	{"empty tag key", `{tags: {"": v}}`, "empty tag keys aren't supported"},
	{"restricted tag eks cluster name", `{tags: {"eks:eks-cluster-name": x}}`, "restricted tag matching eks:eks-cluster-name"},
	{"restricted tag kubernetes.io/cluster", `{tags: {"kubernetes.io/cluster/test": owned}}`, "restricted tag matching kubernetes.io/cluster/"},
	{"restricted tag nodepool", `{tags: {"karpenter.sh/nodepool": x}}`, "restricted tag matching karpenter.sh/nodepool"},
	{"restricted tag nodeclaim", `{tags: {"karpenter.sh/nodeclaim": x}}`, "restricted tag matching karpenter.sh/nodeclaim"},
	{"restricted tag ec2nodeclass", `{tags: {"karpenter.k8s.aws/ec2nodeclass": x}}`, "restricted tag matching karpenter.k8s.aws/ec2nodeclass"},
	{"image GC thresholds inverted", `{kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}}`, "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
	{"evictionSoft without grace period", `{kubelet: {evictionSoft: {memory.available: 5%}}}`, "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
	{"grace period without evictionSoft", `{kubelet: {evictionSoftGracePeriod: {memory.available: 1m}}}`, "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"},
	{"unknown eviction signal", `{kubelet: {evictionHard: {memory.free: 5%}}}`, "valid keys for evictionHard are"},
	{"unknown evictionSoft signal", `{kubelet: {evictionSoft: {memory.free: 5%}, evictionSoftGracePeriod: {memory.free: 1m}}}`, "valid keys for evictionSoft are"},
	{"unknown grace period signal", `{kubelet: {evictionSoft: {memory.free: 5%}, evictionSoftGracePeriod: {memory.free: 1m}}}`, "valid keys for evictionSoftGracePeriod are"},
	{"unknown systemReserved key", `{kubelet: {systemReserved: {gpu: "1"}}}`, "valid keys for systemReserved are"},
	{"negative systemReserved", `{kubelet: {systemReserved: {cpu: "-1"}}}`, "systemReserved value cannot be a negative resource quantity"},
	{"unknown kubeReserved key", `{kubelet: {kubeReserved: {gpu: "1"}}}`, "valid keys for kubeReserved are"},
	{"negative kubeReserved", `{kubelet: {kubeReserved: {memory: "-1Gi"}}}`, "kubeReserved value cannot be a negative resource quantity"},
	{"two root volumes", `{blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi}}, {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 20Gi}}]}`, "must have only one blockDeviceMappings with rootVolume"},
	{"ebs without size or snapshot", `{blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]}`, "snapshotID or volumeSize must be defined"},
	{"initialization rate too low", `{blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 50}}]}`, "should be greater than or equal to 100"},
	{"initialization rate without snapshot", `{blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}}]}`, "snapshotID must be set when volumeInitializationRate is set"},
	{"placement group by name and id", `{placementGroupSelector: {name: pg, id: pg-123}}`, "'name' and 'id' are mutually exclusive"},
	{"empty placement group selector", `{placementGroupSelector: {}}`, "expected at least one, got none, ['name', 'id']"},
	{"network interfaces without primary", `{networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]}`, "networkInterfaces must include a primary interface with interfaceType='interface'"},
	{"two EFA-only interfaces on one card", `{networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}]}`, "can have at most one efa device per network card"},
	{"empty connection tracking", `{connectionTracking: {}}`, "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
	{"udp timeout out of range", `{connectionTracking: {udpTimeout: 90}}`, "should be less than or equal to 60"},
	{"unknown amiFamily", `{amiFamily: Ubuntu}`, "Unsupported value: \"Ubuntu\""},
}

func offlineValidator(t *testing.T) *crdschema.Validator {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	v, err := crdschema.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func object(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(validClass), &u.Object); err != nil {
		t.Fatal(err)
	}
	if spec != "" {
		var patch map[string]any
		if err := yaml.Unmarshal([]byte(spec), &patch); err != nil {
			t.Fatalf("case spec %q: %v", spec, err)
		}
		s := u.Object["spec"].(map[string]any)
		for k, v := range patch {
			if v == nil {
				delete(s, k)
			} else {
				s[k] = v
			}
		}
	}
	return u
}

func TestEC2NodeClassCRDRules(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()

	t.Run("control: the base object is accepted", func(t *testing.T) {
		offline := offlineValidator(t)
		for _, spec := range []string{"", `{amiFamily: Custom}`, `{amiFamily: AL2023}`, `{amiFamily: AL2, amiSelectorTerms: [{id: ami-1}, {name: x, owner: self}]}`, `{role: null, instanceProfile: p}`} {
			obj := object(t, spec)
			if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("valid EC2NodeClass with %s rejected: %v", spec, err)
			}
			if _, msgs := offline.ValidateObject(ctx, obj.Object); len(msgs) != 0 {
				t.Errorf("valid EC2NodeClass with %s rejected offline: %q", spec, msgs)
			}
		}
	})
	offline := offlineValidator(t)
	for _, tc := range crdCases {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, tc.spec)
			err := c.Create(ctx, obj, client.DryRunAll)
			if err == nil {
				t.Fatalf("spec %s was accepted; want %q", tc.spec, tc.reject)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.reject) {
				t.Fatalf("spec %s: got %v; want an Invalid error containing %q", tc.spec, err, tc.reject)
			}
			// Differential: kubectl karpx lint's offline validation
			// rejects it too, each message word for word as the API
			// server's.
			fields, msgs := offline.ValidateObject(ctx, obj.Object)
			if len(msgs) == 0 {
				t.Fatalf("offline validation accepts what the API server rejects: %v", err)
			}
			found := false
			for i, m := range msgs {
				full := fields[i] + ": " + m
				if !strings.Contains(err.Error(), full) {
					t.Errorf("offline message %q is not in the API server's error %q", full, err.Error())
				}
				found = found || strings.Contains(full, tc.reject)
			}
			if !found {
				t.Errorf("offline messages %q lack %q", msgs, tc.reject)
			}
		})
	}
	t.Run("instanceProfile to role on update", func(t *testing.T) {
		u := object(t, `{role: null, instanceProfile: p}`)
		u.SetName("transition")
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(ctx, u) })
		s := u.Object["spec"].(map[string]any)
		delete(s, "instanceProfile")
		s["role"] = "r"
		err := c.Update(ctx, u)
		if err == nil || !strings.Contains(err.Error(), "changing from 'instanceProfile' to 'role' is not supported") {
			t.Fatalf("update from instanceProfile to role: got %v", err)
		}
	})
}

// schemaRejected: the one shared example Karpenter's own NodePool CRD
// rejects (nodeClassRef.group "karpenter.k8s.aws/v1" fails ^[^/]*$); its
// EC2NodeClass must still be accepted.
var schemaRejected = map[string]string{
	"windows-custom-userdata.yaml": `spec.template.spec.nodeClassRef.group: Invalid value: "karpenter.k8s.aws/v1"`,
}

// TestKarpenterExamplesAccepted applies every object of the shared
// Karpenter v1 examples (with ${CLUSTER_NAME} substituted) with a
// server-side dry run.
func TestKarpenterExamplesAccepted(t *testing.T) {
	c := startAPIServer(t)
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "test", "testdata", "karpenter-examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("${CLUSTER_NAME}"), []byte("test"))
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			n++
			err = c.Create(context.Background(), u, client.DryRunAll)
			if want := schemaRejected[filepath.Base(f)]; want != "" && u.GetKind() == "NodePool" {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: NodePool %s: got %v, want Karpenter's CRD to reject it with %q", filepath.Base(f), u.GetName(), err, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s %s rejected: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
		}
	}
	if n < 16 {
		t.Fatalf("only %d objects found in the examples", n)
	}
}

// NodePools: what kubectl karpx lint's offline validation says about
// Karpenter's NodePool CRD must be what the API server says, for the
// NodePools of issue 14 (rejected) and for controls (accepted). A negative
// limit passes both, which is why lint adds its own rule (KX106).
func TestNodePoolOfflineValidationMatchesAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	offline := offlineValidator(t)
	nodePool := func(spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		base := `{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: np}, spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: a}, requirements: [` + spec + `]}}}}`
		if err := yaml.Unmarshal([]byte(base), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	cases := []struct {
		name, requirement string
		rejected          bool
	}{
		{"Gt abc", `{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["abc"]}`, true},
		{"Gt 2.5", `{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2.5"]}`, true},
		{"minValues above values", `{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 3}`, true},
		{"In without values", `{key: karpenter.k8s.aws/instance-category, operator: In}`, true},
		{"control: Gt 2", `{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}`, false},
		{"control: minValues 2", `{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 2}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := nodePool(tc.requirement)
			err := c.Create(ctx, u, client.DryRunAll)
			fields, msgs := offline.ValidateObject(ctx, u.Object)
			if (err != nil) != tc.rejected || (len(msgs) > 0) != tc.rejected {
				t.Fatalf("API server: %v; offline: %q; want rejected=%v", err, msgs, tc.rejected)
			}
			for i, m := range msgs {
				if full := fields[i] + ": " + m; !strings.Contains(err.Error(), full) {
					t.Errorf("offline message %q is not in the API server's error %q", full, err.Error())
				}
			}
		})
	}
	t.Run("unknown field under strict field validation", func(t *testing.T) {
		u := nodePool("")
		u.Object["spec"].(map[string]any)["maxNodes"] = int64(3)
		err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
		_, msgs := offline.ValidateObject(ctx, u.Object)
		want := `unknown field "spec.maxNodes"`
		if err == nil || !strings.Contains(err.Error(), want) || len(msgs) != 1 || msgs[0] != want {
			t.Fatalf("API server: %v; offline: %q; want %q from both", err, msgs, want)
		}
	})
	t.Run("negative limit passes both", func(t *testing.T) {
		u := nodePool("")
		u.Object["spec"].(map[string]any)["limits"] = map[string]any{"cpu": "-1"}
		err := c.Create(ctx, u, client.DryRunAll)
		if _, msgs := offline.ValidateObject(ctx, u.Object); err != nil || len(msgs) != 0 {
			t.Fatalf("API server: %v; offline: %q; want both to accept", err, msgs)
		}
	})
}
