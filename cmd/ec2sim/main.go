// Command ec2sim serves the karpx EC2 simulator (package ec2sim) until it is
// interrupted. With --kubeconfig, running instances join that cluster as
// Nodes; run kwok with --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
// (or --manage-all-nodes) and --disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom
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
	var f ec2sim.CommandFlags
	f.AddFlags(flags)
	if err := flags.Parse(os.Args[1:]); err != nil {
		return err
	}

	level := slog.LevelInfo
	if f.Verbose {
		level = slog.LevelDebug
	}
	// logr V(1) maps to slog's debug level.
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := ec2sim.Config{
		Region: f.Region, AccountID: f.AccountID, ClusterName: f.ClusterName, KubernetesVersion: f.KubernetesVersion,
		BootDelay: f.BootDelay, PendingDelay: f.PendingDelay, TerminatedRetention: f.TerminatedRetention,
		Throttle: ec2sim.ThrottleConfig{Disabled: !f.Throttle, Neighbours: f.Neighbours}, MarkReady: f.MarkReady, Seed: f.Seed, Logger: log,
		InterruptionQueue: f.InterruptionQueue, SpotInterruptionNotice: f.SpotInterruptionNotice,
		ClusterEndpoint: f.ClusterEndpoint, ServiceIPv4CIDR: f.ServiceIPv4CIDR,
	}
	if f.Zones != "" {
		cfg.Zones = strings.Split(f.Zones, ",")
	}
	if f.IAMRoles != "" {
		cfg.IAMRoles = strings.Split(f.IAMRoles, ",")
	}
	cfg.IAMRolePatterns = []string{}
	if f.IAMRolePatterns != "" {
		cfg.IAMRolePatterns = strings.Split(f.IAMRolePatterns, ",")
	}
	if f.Kubeconfig != "" {
		rest, err := clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
		if err != nil {
			return fmt.Errorf("loading kubeconfig: %w", err)
		}
		kube, err := client.New(rest, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			return fmt.Errorf("building Kubernetes client: %w", err)
		}
		cfg.Kube = kube
		// EKS DescribeCluster answers the cluster the Nodes join.
		if cfg.ClusterEndpoint == "" {
			cfg.ClusterEndpoint = rest.Host
		}
		cfg.ClusterCA = rest.CAData
		if len(cfg.ClusterCA) == 0 && rest.CAFile != "" {
			if cfg.ClusterCA, err = os.ReadFile(rest.CAFile); err != nil {
				return fmt.Errorf("reading the kubeconfig's CA: %w", err)
			}
		}
	}
	sim, err := ec2sim.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	endpoint, err := sim.Start(ctx, f.Listen)
	if err != nil {
		return err
	}
	log.Info("Ready", "endpoint", endpoint, "counts", endpoint+"/_sim/counts", "metrics", endpoint+"/metrics")
	<-ctx.Done()
	log.Info("Shutting down")
	<-sim.Stopped()
	return nil
}
