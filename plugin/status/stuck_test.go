package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestStuckFlagsClaimsPastTheirTTLs(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := func(name string, age time.Duration, conds ...string) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		for _, c := range conds {
			nc.Status.Conditions = append(nc.Status.Conditions, status.Condition{Type: c, Status: metav1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now.Add(-age))})
		}
		if len(conds) == 0 {
			nc.Status.Conditions = []status.Condition{{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionFalse}}
		}
		return nc
	}
	claims := []karpv1.NodeClaim{
		claim("fresh-pending", time.Minute),
		claim("old-pending", 10*time.Minute),
		claim("launched-long", 20*time.Minute, karpv1.ConditionTypeLaunched),
		claim("registered-long", 20*time.Minute, karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered),
		claim("healthy", 20*time.Minute, karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized),
		claim("not-ready", 40*time.Minute, karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, conditionNodeNotReady),
	}
	var out bytes.Buffer
	printStuck(&out, claims, now)
	text := out.String()
	for name, want := range map[string]string{
		"old-pending":     "launch TTL",
		"launched-long":   "registration TTL",
		"registered-long": "not Initialized",
		"not-ready":       "NotReady",
	} {
		if !strings.Contains(text, name+" (") || !strings.Contains(text, want) {
			t.Errorf("stuck list lacks %s (%s):\n%s", name, want, text)
		}
	}
	for _, name := range []string{"fresh-pending", "healthy "} {
		if strings.Contains(text, " "+name) {
			t.Errorf("%s listed as stuck:\n%s", name, text)
		}
	}
}
