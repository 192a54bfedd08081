package ec2sim

import (
	"context"
	"encoding/base64"
	"maps"
	"strings"
	"testing"
	"time"
)

// TestRegistrationFromUserData: the labels and taints kubelet registers
// with, read from each AMI family's user data as karpx and Karpenter v1.14
// write it, and the user data a bootstrap could not read.
func TestRegistrationFromUserData(t *testing.T) {
	karpxAL2023 := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n  kubelet:\n    flags:\n" +
		"    - --node-labels=karpenter.sh/nodepool=default,team=a\n    - --register-with-taints=d=b:NoSchedule,karpenter.sh/unregistered:NoExecute\n\n--//--\n"
	bootstrap := func(extra string) string {
		return "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log | logger -t user-data -s 2>/dev/console) 2>&1\n" +
			"/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://x' --b64-cluster-ca 'Y2E=' \\\n--use-max-pods false \\\n--kubelet-extra-args " + extra + "\n"
	}
	inMIME := func(ct, body string) string {
		return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: " + ct + "\n\n" + body + "\n--//--\n"
	}
	bottlerocket := "[settings.kubernetes]\napi-server = \"https://x\"\ncluster-name = \"demo\"\n[settings.kubernetes.node-labels]\n\"karpenter.sh/nodepool\" = \"default\"\nteam = \"a\"\n" +
		"[settings.kubernetes.node-taints]\nd = [\"b:NoSchedule\"]\n\"karpenter.sh/unregistered\" = [\":NoExecute\"]\n"
	want := map[string]string{"karpenter.sh/nodepool": "default", "team": "a"}
	wantTaints := "d=b:NoSchedule,karpenter.sh/unregistered:NoExecute"
	for _, tc := range []struct {
		name, family, userData string
		labels                 map[string]string
		taints, err            string
	}{
		{name: "karpx AL2023 NodeConfig flags", family: familyAL2023, userData: karpxAL2023, labels: want, taints: wantTaints},
		{name: "Karpenter AL2023, user NodeConfig first", family: familyAL2023, userData: karpenterAL2023UserData,
			labels: map[string]string{"karpenter.sh/nodepool": "default", "team": "a", "from-user": "yes", "karpenter.sh/capacity-type": "spot",
				"karpenter.k8s.aws/ec2nodeclass": "default", "karpenter.sh/do-not-sync-taints": "true"},
			taints: "dedicated=batch:NoSchedule,example.com/cni-not-ready:NoSchedule,karpenter.sh/unregistered:NoExecute"},
		{name: "bare NodeConfig", family: familyAL2023, userData: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--node-labels=team=a\"]\n",
			labels: map[string]string{"team": "a"}},
		{name: "base64 NodeConfig part", family: familyAL2023, userData: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\n" +
			base64.StdEncoding.EncodeToString([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--register-with-taints=x:NoExecute\"]\n")) + "\n--b--\n",
			labels: map[string]string{}, taints: "x:NoExecute"},
		{name: "karpx AL2 bootstrap.sh", family: familyAL2, labels: want, taints: wantTaints,
			userData: inMIME(`text/x-shellscript; charset="us-ascii"`, bootstrap("'--node-labels=karpenter.sh/nodepool=default,team=a --register-with-taints=d=b:NoSchedule,karpenter.sh/unregistered:NoExecute'"))},
		{name: "Karpenter AL2 bootstrap.sh, quoted flag values", family: familyAL2, labels: want, taints: wantTaints,
			userData: inMIME(`text/x-shellscript; charset="us-ascii"`, bootstrap(`'--node-labels="karpenter.sh/nodepool=default,team=a" --register-with-taints="d=b:NoSchedule,karpenter.sh/unregistered:NoExecute" --max-pods=29'`))},
		{name: "bootstrap.sh as the whole user data, flags as separate words", family: familyAL2, labels: want, taints: "",
			userData: bootstrap("\"--node-labels karpenter.sh/nodepool=default,team=a\"")},
		{name: "Bottlerocket", family: familyBottlerocket, userData: bottlerocket, labels: want, taints: wantTaints},
		{name: "unknown AMI with Bottlerocket TOML", family: "", userData: bottlerocket, labels: want, taints: wantTaints},
		{name: "no user data", family: familyAL2023, userData: "", labels: map[string]string{}},
		{name: "script without bootstrap.sh", family: familyAL2, userData: "#!/bin/bash\necho hi\n", labels: map[string]string{}},
		{name: "taint without effect", family: familyAL2023, err: "has no effect",
			userData: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--register-with-taints=x\"]\n"},
		{name: "registerWithTaints with a bad effect", family: familyAL2023, err: "registerWithTaints",
			userData: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      registerWithTaints: [{key: x, effect: Sometimes}]\n"},
		{name: "Bottlerocket taint without effect", family: familyBottlerocket, err: "node-taints.x",
			userData: "[settings.kubernetes.node-taints]\nx = [\"y\"]\n"},
		{name: "malformed TOML", family: familyBottlerocket, userData: "[settings.kubernetes\n", err: "Bottlerocket TOML"},
		{name: "malformed MIME", family: familyAL2023, userData: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"\n\n", err: "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := registrationOf(tc.family, tc.userData)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(reg.labels, tc.labels) {
				t.Errorf("labels %v, want %v", reg.labels, tc.labels)
			}
			if got := taintList(reg.taints); got != tc.taints {
				t.Errorf("taints %q, want %q", got, tc.taints)
			}
		})
	}
}

// TestUnreadableUserDataNeverRegisters: a kubelet whose flags the
// bootstrap cannot read never starts, so its instance runs without a Node
// and the kubelet pass reports why.
func TestUnreadableUserDataNeverRegisters(t *testing.T) {
	env := newKubeEnv(t, Config{})
	env.launchTemplate(t, "bad", env.al2023(t, "x86_64"),
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--register-with-taints=x:Sometimes\"]\n")
	in := env.launch(t, "bad", "m5.large", nil)
	env.clk.Step(time.Minute)
	err := env.sim.Reconcile(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kubelet cannot start") || !strings.Contains(err.Error(), "x:Sometimes") {
		t.Fatalf("Reconcile: %v", err)
	}
	if _, ok := env.node(t, *in.PrivateDnsName); ok {
		t.Fatal("node registered")
	}
}

// FuzzRegistrationOf reads arbitrary user data as each AMI family: it must
// never panic, and what it returns is either an error or labels with
// non-empty keys and taints with a valid effect.
func FuzzRegistrationOf(f *testing.F) {
	f.Add(karpenterAL2023UserData)
	f.Add("#!/bin/bash\n/etc/eks/bootstrap.sh demo --kubelet-extra-args '--node-labels=a=b --register-with-taints=k=v:NoSchedule'\n")
	f.Add("[settings.kubernetes.node-taints]\nk = [\"v:NoExecute\"]\n")
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"x\"\n\n--x\nContent-Type: multipart/mixed; boundary=\"y\"\n\n--y\n\n--y--\n--x--\n")
	f.Fuzz(func(t *testing.T, userData string) {
		for _, family := range []string{familyAL2023, familyAL2, familyBottlerocket, ""} {
			reg, err := registrationOf(family, userData)
			if err != nil {
				continue
			}
			for k := range reg.labels {
				if k == "" {
					t.Fatalf("%s: empty label key from %q", family, userData)
				}
			}
			for _, tn := range reg.taints {
				if !validEffect(tn.Effect) {
					t.Fatalf("%s: taint %v from %q", family, tn, userData)
				}
			}
		}
	})
}
