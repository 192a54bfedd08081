package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCatalogLoadsEveryInstanceType(t *testing.T) {
	if got := Len(); got != 1363 {
		t.Fatalf("Len() = %d, want 1363 instance types from the shared catalogue", got)
	}
	if Source().Repository != "aws/karpenter-provider-aws" || Source().Commit == "" {
		t.Fatalf("Source() = %+v, want the upstream repository and commit", Source())
	}
	for _, it := range All() {
		if it.Labels[LabelInstanceType] != it.Name {
			t.Errorf("%s: label %s = %q", it.Name, LabelInstanceType, it.Labels[LabelInstanceType])
		}
		if it.Allocatable.Cpu().IsZero() || it.Allocatable.Memory().IsZero() {
			t.Errorf("%s: allocatable %v has no cpu or memory", it.Name, it.Allocatable)
		}
		if it.Arch() != "amd64" && it.Arch() != "arm64" {
			t.Errorf("%s: arch %q", it.Name, it.Arch())
		}
	}
}

func TestGetM5Large(t *testing.T) {
	it, ok := Get("m5.large")
	if !ok {
		t.Fatal("m5.large missing")
	}
	if it.VCPUs() != 2 || it.MemoryMiB() != 8192 || it.Arch() != "amd64" {
		t.Fatalf("m5.large: vcpu=%d mem=%d arch=%s", it.VCPUs(), it.MemoryMiB(), it.Arch())
	}
	if it.OnDemandPriceUSDPerHour == nil || *it.OnDemandPriceUSDPerHour != 0.096 {
		t.Fatalf("m5.large price = %v, want 0.096", it.OnDemandPriceUSDPerHour)
	}
	capacity := it.Capacity()
	if capacity.Cpu().MilliValue() != 2000 || capacity.Cpu().Cmp(*it.Allocatable.Cpu()) <= 0 {
		t.Fatalf("capacity cpu %v must be 2 and exceed allocatable %v", capacity.Cpu(), it.Allocatable.Cpu())
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		t.Fatal("capacity lacks pods")
	}
	if _, ok := Get("m5.nonexistent"); ok {
		t.Fatal("Get of an unknown type succeeded")
	}
}
