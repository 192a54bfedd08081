// Command karpx-controller runs the karpx autoscaler: it provisions
// NodeClaims for pending pods on EC2 and takes each through launch,
// registration, initialisation and termination. See autoscaler/operator for
// its flags (also settable through the environment).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/karpx/karpx/autoscaler/operator"
)

func main() {
	var opts operator.Options
	opts.AddFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime registers --kubeconfig on flag.CommandLine

	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	ctx := logr.NewContext(ctrl.SetupSignalHandler(), log)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: no Kubernetes configuration: %v (set --kubeconfig or run in a cluster)\n", err)
		os.Exit(1)
	}
	op, err := operator.NewAWS(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	log.Info("starting karpx autoscaler", "cluster", opts.ClusterName, "region", opts.Region, "ec2Endpoint", opts.EC2Endpoint)
	if err := op.Start(ctx); err != nil {
		log.Error(err, "autoscaler stopped")
		os.Exit(1)
	}
}
