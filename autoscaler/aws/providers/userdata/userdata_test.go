package userdata

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpx/karpx/apis/v1"
)

func opts(family string, custom string) Options {
	maxPods := int32(42)
	o := Options{
		Family: family, ClusterName: "demo", ClusterEndpoint: "https://api.demo", CABundle: "Q0E=",
		Kubelet: &v1.KubeletConfiguration{MaxPods: &maxPods, ClusterDNS: []string{"10.100.0.10"}},
		Labels: map[string]string{
			"karpenter.sh/nodepool":            "default",
			"team":                             "a",
			"node-role.kubernetes.io/worker":   "", // NodeRestriction forbids it
			"node.kubernetes.io/instance-type": "m5.large",
		},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		},
	}
	if custom != "" {
		o.CustomUserData = &custom
	}
	return o
}

func TestAL2023MergesUserParts(t *testing.T) {
	custom := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho user\n--BOUND\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n--BOUND--\n"
	out, err := Generate(opts(v1.AMIFamilyAL2023, custom))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Content-Type: multipart/mixed; boundary=\"//\"",
		"echo user",
		"shutdownGracePeriod: 30s",
		"name: demo",
		"apiServerEndpoint: https://api.demo",
		"certificateAuthority: Q0E=",
		"cidr: 10.100.0.0/16",
		"maxPods: 42",
		"- --node-labels=karpenter.sh/nodepool=default,node.kubernetes.io/instance-type=m5.large,team=a",
		"- --register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "node-role") {
		t.Error("restricted label passed to the kubelet")
	}
	// User parts come before karpx's NodeConfig so that nodeadm lets karpx win.
	if strings.Index(out, "echo user") > strings.Index(out, "apiServerEndpoint") {
		t.Error("user parts must precede karpx's NodeConfig")
	}
	if n := strings.Count(out, "--//\n"); n != 3 {
		t.Errorf("want 3 parts, got %d", n)
	}
	again, _ := Generate(opts(v1.AMIFamilyAL2023, custom))
	if again != out {
		t.Error("output not deterministic")
	}
}

func TestAL2023BareNodeConfigAndShell(t *testing.T) {
	out, err := Generate(opts(v1.AMIFamilyAL2023, "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "Content-Type: application/node.eks.aws") != 2 {
		t.Errorf("bare NodeConfig must become a NodeConfig part:\n%s", out)
	}
	out, _ = Generate(opts(v1.AMIFamilyAL2023, "#!/bin/bash\necho hi\n"))
	if !strings.Contains(out, "Content-Type: text/x-shellscript") {
		t.Errorf("shell must become a shell part:\n%s", out)
	}
	if _, err := Generate(opts(v1.AMIFamilyAL2023, "MIME-Version: 1.0\nContent-Type: text/plain\n\nx")); err == nil {
		t.Error("non-multipart MIME must fail")
	}
}

func TestAL2Bootstrap(t *testing.T) {
	out, err := Generate(opts(v1.AMIFamilyAL2, "#!/bin/bash\necho pre\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"echo pre", "/etc/eks/bootstrap.sh 'demo'", "--apiserver-endpoint 'https://api.demo'", "--b64-cluster-ca 'Q0E='", "--dns-cluster-ip '10.100.0.10'", "--use-max-pods false", "--max-pods=42", "--register-with-taints=dedicated=gpu:NoSchedule"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestBottlerocketMerge(t *testing.T) {
	custom := "[settings.kubernetes]\ncluster-name = \"user-wins-not\"\nallowed-unsafe-sysctls = [\"net.core.somaxconn\"]\n[settings.host-containers.admin]\nenabled = true\n"
	out, err := Generate(opts(v1.AMIFamilyBottlerocket, custom))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName string              `toml:"cluster-name"`
				APIServer   string              `toml:"api-server"`
				Sysctls     []string            `toml:"allowed-unsafe-sysctls"`
				Labels      map[string]string   `toml:"node-labels"`
				Taints      map[string][]string `toml:"node-taints"`
				MaxPods     int                 `toml:"max-pods"`
			} `toml:"kubernetes"`
			HostContainers map[string]map[string]any `toml:"host-containers"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName != "demo" || k.APIServer != "https://api.demo" || k.MaxPods != 42 || len(k.Sysctls) != 1 ||
		k.Labels["team"] != "a" || k.Labels["node-role.kubernetes.io/worker"] != "" ||
		len(k.Taints["dedicated"]) != 2 || doc.Settings.HostContainers["admin"]["enabled"] != true {
		t.Fatalf("bad merge: %+v\n%s", doc, out)
	}
	if _, err := Generate(opts(v1.AMIFamilyBottlerocket, "not = [toml")); err == nil {
		t.Error("invalid TOML must fail")
	}
}

func TestCustomAndWindows(t *testing.T) {
	out, err := Generate(opts(v1.AMIFamilyCustom, "raw"))
	if err != nil || out != "raw" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := Generate(opts(v1.AMIFamilyWindows2022, "")); err == nil {
		t.Fatal("windows must fail")
	}
}

func TestKubeletMaySet(t *testing.T) {
	for k, want := range map[string]bool{
		"team": true, "karpenter.sh/nodepool": true, "example.com/x": true,
		"kubernetes.io/arch": true, "node.kubernetes.io/instance-type": true, "topology.kubernetes.io/zone": true,
		"node-role.kubernetes.io/worker": false, "kubernetes.io/foo": false, "k8s.io/x": false,
	} {
		if KubeletMaySet(k) != want {
			t.Errorf("%s: want %v", k, want)
		}
	}
}
