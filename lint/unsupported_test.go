package lint

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func decodeYAML(t *testing.T, y string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// summary is "rule field" per finding, in order.
func summary(fs Findings) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.RuleID+" "+f.Field)
	}
	return strings.Join(out, "; ")
}

func TestCheckUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name, obj, want string
	}{
		{"RAID0", "kind: EC2NodeClass\nspec: {instanceStorePolicy: RAID0}", "KX201 spec.instanceStorePolicy"},
		{"every new EC2NodeClass field", `kind: EC2NodeClass
spec:
  networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}]
  ipPrefixCount: 0
  placementGroupSelector: {name: pg}
  cpuOptions: {nestedVirtualization: enabled}
  connectionTracking: {udpTimeout: 30}
  capacityReservationSelectorTerms: [{id: cr-1}]`,
			"KX201 spec.networkInterfaces; KX201 spec.ipPrefixCount; KX201 spec.placementGroupSelector; KX201 spec.cpuOptions; KX201 spec.connectionTracking"},
		{"rootVolume true is denied by index, false is not", `kind: EC2NodeClass
spec:
  blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: false}, {deviceName: /dev/xvdb, rootVolume: true}]`, "KX201 spec.blockDeviceMappings[1].rootVolume"},
		{"null and empty ask for nothing", "kind: EC2NodeClass\nspec: {instanceStorePolicy: null, capacityReservationSelectorTerms: [], cpuOptions: {}}", ""},
		{"status is not checked", "kind: EC2NodeClass\nstatus: {capacityReservations: [{id: cr-1}]}", ""},
		{"static NodePool is implemented (nodepool/static)", "kind: NodePool\nspec: {replicas: 3}", ""},
		{"Balanced", "kind: NodePool\nspec: {disruption: {consolidationPolicy: Balanced}}", "KX202 spec.disruption.consolidationPolicy"},
		{"WhenEmpty is implemented", "kind: NodePool\nspec: {disruption: {consolidationPolicy: WhenEmpty}}", ""},
		{"a field of another kind's entry", "kind: NodePool\nspec: {instanceStorePolicy: RAID0}", ""},
		{"NodeOverlay is served (issue 33)", "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nspec: {priceAdjustment: '-10%'}", ""},
		{"a wrongly typed value is skipped, not a panic", "kind: EC2NodeClass\nspec: {blockDeviceMappings: {a: b}, networkInterfaces: 3}", "KX201 spec.networkInterfaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := CheckUnsupported(decodeYAML(t, tc.obj))
			if got := summary(fs); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, f := range fs {
				if f.Severity != SeverityDeny || !strings.Contains(f.Message, NotSupportedYet) {
					t.Errorf("finding %s: severity %s, message %q", f.RuleID, f.Severity, f.Message)
				}
				if w := f.Warning(); !strings.Contains(w, f.RuleID+" "+f.Field) {
					t.Errorf("warning %q lacks rule and field", w)
				}
			}
		})
	}
	fs := CheckUnsupported(decodeYAML(t, "kind: NodePool\nspec: {disruption: {consolidationPolicy: Balanced}}"))
	if !strings.HasPrefix(fs[0].Message, "Balanced "+NotSupportedYet) {
		t.Errorf("value finding %q does not name the value", fs[0].Message)
	}
}

// CheckUnsupportedSpec finds what CheckUnsupported finds on the whole
// object, from the spec's JSON alone.
func TestCheckUnsupportedSpecMatchesCheckUnsupported(t *testing.T) {
	for kind, spec := range map[string]string{
		"EC2NodeClass": `{"userData":"#!/bin/bash\n","instanceStorePolicy":"RAID0","blockDeviceMappings":[{"rootVolume":true}],"placementGroupSelector":{"id":"pg-1"}}`,
		"NodePool":     `{"replicas":2,"disruption":{"consolidationPolicy":"Balanced"},"weight":3}`,
	} {
		var m any
		if err := json.Unmarshal([]byte(spec), &m); err != nil {
			t.Fatal(err)
		}
		want := summary(CheckUnsupported(map[string]any{"kind": kind, "spec": m}))
		if want == "" {
			t.Fatalf("%s: control finds nothing", kind)
		}
		if got := summary(CheckUnsupportedSpec(kind, json.RawMessage(spec))); got != want {
			t.Errorf("%s: got %q, want %q", kind, got, want)
		}
	}
	if fs := CheckUnsupportedSpec("EC2NodeClass", json.RawMessage(`[1,2]`)); fs != nil {
		t.Errorf("a spec that is not an object: %v", fs)
	}
	if fs := CheckUnsupportedSpec("EC2NodeClass", json.RawMessage(`{"userData":"x"}`)); fs != nil {
		t.Errorf("no listed field: %v", fs)
	}
}
