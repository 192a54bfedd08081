package upstream

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/test/cluster"
)

// TestRegistrationDelay: ec2sim's launch-to-Node time (PendingDelay +
// BootDelay, defaults applied) becomes the KWOKNodeClass delay when it is
// whole seconds, and is refused, naming the fields, when it is not (the
// defaults, 200ms + 1s).
func TestRegistrationDelay(t *testing.T) {
	d, err := RegistrationDelay(ec2sim.Config{BootDelay: 800 * time.Millisecond})
	if err != nil || d != time.Second {
		t.Errorf("PendingDelay default + BootDelay 800ms: %v, %v; want 1s", d, err)
	}
	d, err = RegistrationDelay(ec2sim.Config{PendingDelay: time.Second, BootDelay: 2 * time.Second})
	if err != nil || d != 3*time.Second {
		t.Errorf("1s + 2s: %v, %v; want 3s", d, err)
	}
	if _, err := RegistrationDelay(ec2sim.Config{}); err == nil || !strings.Contains(err.Error(), "BootDelay 1s = 1.2s") || !strings.Contains(err.Error(), "ec2sim.Config.BootDelay") {
		t.Errorf("defaults (1.2s): %v, want an error naming BootDelay", err)
	}
}

// nodeRegistrationDelayPattern is the KWOKNodeClass CRD's pattern for
// spec.nodeRegistrationDelay (sigs.k8s.io/karpenter/kwok/apis/crds).
var nodeRegistrationDelayPattern = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)

// TestNodeClass: the class serialises with a delay the CRD's pattern
// accepts, and a delay it would refuse is refused here first.
func TestNodeClass(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 2 * time.Hour} {
		nc, err := NodeClass("default", d)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(nc)
		if err != nil {
			t.Fatal(err)
		}
		var u struct {
			APIVersion, Kind string
			Spec             struct{ NodeRegistrationDelay string }
		}
		if err := json.Unmarshal(data, &u); err != nil {
			t.Fatal(err)
		}
		if u.APIVersion != "karpenter.kwok.sh/v1alpha1" || u.Kind != "KWOKNodeClass" || !nodeRegistrationDelayPattern.MatchString(u.Spec.NodeRegistrationDelay) {
			t.Errorf("%s: %s", d, data)
		}
	}
	if nc, err := NodeClass("instant", 0); err != nil || nc.Spec.NodeRegistrationDelay != (metav1.Duration{}) {
		t.Errorf("no delay: %+v, %v", nc, err)
	}
	for _, d := range []time.Duration{1500 * time.Millisecond, -time.Second} {
		if _, err := NodeClass("bad", d); err == nil || !strings.Contains(err.Error(), "spec.nodeRegistrationDelay") {
			t.Errorf("%s: %v, want an error naming spec.nodeRegistrationDelay", d, err)
		}
	}
}

// TestTranslate: only the nodeClassRef changes, and the input is not
// modified.
func TestTranslate(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.StartupTaints = nil
	np.Spec.Template.Labels = map[string]string{"team": "a"}
	out, err := Translate(np)
	if err != nil {
		t.Fatal(err)
	}
	if ref := out.Spec.Template.Spec.NodeClassRef; ref.Group != "karpenter.kwok.sh" || ref.Kind != "KWOKNodeClass" || ref.Name != "default" {
		t.Errorf("nodeClassRef = %+v", ref)
	}
	if np.Spec.Template.Spec.NodeClassRef.Kind != "EC2NodeClass" {
		t.Error("the input NodePool was modified")
	}
	out.Spec.Template.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
	if a, b := mustJSON(t, out), mustJSON(t, np); a != b {
		t.Errorf("more than the nodeClassRef changed:\n%s\n%s", a, b)
	}
	if _, err := Translate(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "x"}}); err == nil || !strings.Contains(err.Error(), "nodeClassRef.name") {
		t.Errorf("no nodeClassRef: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestVersionIsGoMod: Version, which CheckBinary holds bin/karpenter-kwok
// to and InstallCRDs takes the CRDs of, is the version go.mod requires, and
// CheckBinary refuses what is not the kwok provider.
func TestVersionIsGoMod(t *testing.T) {
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(ModulePath) + `\s+(v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("go.mod does not require %s", ModulePath)
	}
	if Version != string(m[1]) {
		t.Errorf("Version = %q; go.mod requires %s: update Version in karpenter.go", Version, m[1])
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBinary(self); err == nil || !strings.Contains(err.Error(), "not "+ModulePath+"/kwok") {
		t.Errorf("CheckBinary(the test binary) = %v, want it refused as not the kwok provider", err)
	}
	if err := CheckBinary(filepath.Join(t.TempDir(), BinaryName)); err == nil || !strings.Contains(err.Error(), "make karpenter-kwok") {
		t.Errorf("CheckBinary(missing) = %v, want the fix named", err)
	}
}
