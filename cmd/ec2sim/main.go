// Command ec2sim serves the karpx EC2 simulator (package ec2sim) until it is
// interrupted. With --kubeconfig, running instances join that cluster as
// Nodes; run kwok with --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
// to make them Ready, or pass --mark-ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	// Registers karpenter.sh/v1 (NodeClaim) in scheme.Scheme.
	_ "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ec2sim:", err)
		os.Exit(1)
	}
}

func run() error {
	// A private flag set: imported packages (controller-runtime) register
	// their own --kubeconfig on flag.CommandLine.
	flags := flag.NewFlagSet("ec2sim", flag.ExitOnError)
	var (
		listen       = flags.String("listen", "127.0.0.1:4566", "address to serve the EC2/SSM/SQS API, admin endpoints and metrics on")
		region       = flags.String("region", "us-east-1", "AWS region to simulate")
		zones        = flags.String("zones", "", "comma-separated availability zones (default <region>a,b,c)")
		account      = flags.String("account-id", "123456789012", "account id owning the simulated resources")
		cluster      = flags.String("cluster-name", "karpx", "cluster name for the karpenter.sh/discovery tags of subnets and security groups")
		k8sVersion   = flags.String("kubernetes-version", "1.35", "Kubernetes minor version whose EKS AMIs are seeded")
		kubeconfig   = flags.String("kubeconfig", "", "kubeconfig of the cluster instances join as Nodes (empty: they never join)")
		markReady    = flags.Bool("mark-ready", false, "set the Node Ready condition in the simulator (for clusters without kwok)")
		bootDelay    = flags.Duration("boot-delay", time.Second, "time from running to Node registration")
		pendingDelay = flags.Duration("pending-delay", 200*time.Millisecond, "time from launch to running")
		retention    = flags.Duration("terminated-retention", 5*time.Minute, "how long terminated instances stay visible")
		throttle     = flags.Bool("throttle", true, "apply EC2's request token buckets (RequestLimitExceeded)")
		neighbours   = flags.Float64("neighbours", 0, "share of every EC2/SSM token bucket, in [0, 0.99], used by the account's other clients")
		iamRoles     = flags.String("iam-roles", "", "comma-separated IAM role names that exist (for EC2NodeClass spec.role), besides --iam-role-patterns")
		rolePatterns = flags.String("iam-role-patterns", strings.Join(ec2sim.DefaultIAMRolePatterns, ","), "comma-separated path.Match patterns of IAM role names that exist (empty: none)")
		queue        = flags.String("interruption-queue", "", "name of the SQS queue that receives spot interruption, rebalance, AWS Health and state-change events (empty: no queue)")
		spotNotice   = flags.Duration("spot-interruption-notice", ec2sim.SpotInterruptionNotice, "time from a spot interruption warning to the instance's termination (EC2: 2m)")
		seed         = flags.Uint64("seed", 1, "seed of resource ids and probabilistic faults")
		verbose      = flags.Bool("v", false, "debug logging (every launch, termination and injected fault)")
	)
	if err := flags.Parse(os.Args[1:]); err != nil {
		return err
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	// logr V(1) maps to slog's debug level.
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := ec2sim.Config{
		Region: *region, AccountID: *account, ClusterName: *cluster, KubernetesVersion: *k8sVersion,
		BootDelay: *bootDelay, PendingDelay: *pendingDelay, TerminatedRetention: *retention,
		Throttle: ec2sim.ThrottleConfig{Disabled: !*throttle, Neighbours: *neighbours}, MarkReady: *markReady, Seed: *seed, Logger: log,
		InterruptionQueue: *queue, SpotInterruptionNotice: *spotNotice,
	}
	if *zones != "" {
		cfg.Zones = strings.Split(*zones, ",")
	}
	if *iamRoles != "" {
		cfg.IAMRoles = strings.Split(*iamRoles, ",")
	}
	cfg.IAMRolePatterns = []string{}
	if *rolePatterns != "" {
		cfg.IAMRolePatterns = strings.Split(*rolePatterns, ",")
	}
	if *kubeconfig != "" {
		rest, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return fmt.Errorf("loading kubeconfig: %w", err)
		}
		kube, err := client.New(rest, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			return fmt.Errorf("building Kubernetes client: %w", err)
		}
		cfg.Kube = kube
	}
	sim, err := ec2sim.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	endpoint, err := sim.Start(ctx, *listen)
	if err != nil {
		return err
	}
	log.Info("Ready", "endpoint", endpoint, "counts", endpoint+"/_sim/counts", "metrics", endpoint+"/metrics")
	<-ctx.Done()
	log.Info("Shutting down")
	<-sim.Stopped()
	return nil
}
