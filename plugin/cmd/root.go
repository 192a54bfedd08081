package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin/audit"
	"github.com/karpx/karpx/plugin/capacity"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/explain"
	"github.com/karpx/karpx/plugin/lint"
	"github.com/karpx/karpx/plugin/nodeclaims"
	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/plugin/throttle"
)

// displayName is how the root command names itself in usage lines and
// help: kubectl runs the kubectl-karpx binary for `kubectl karpx`.
const displayName = "kubectl karpx"

const rootLong = `karpx inspects Kubernetes node autoscaling with Karpenter's resources on AWS
EC2: karpenter.sh/v1 NodePools and NodeClaims and karpenter.k8s.aws/v1
EC2NodeClasses.

Subcommands that read the cluster use kubectl's usual flags (--kubeconfig,
--context, --server, …) to select it.`

const rootExample = `  # NodePools and NodeClaims at a glance
  kubectl karpx status

  # Why is a pod pending, and what would each NodePool launch for it?
  kubectl karpx explain pod web-7d4b9 -n shop

  # Plugin and server versions
  kubectl karpx version`

// NewCmdKarpx returns the root `kubectl karpx` command with all
// subcommands registered. Its global flags are kubectl's, from
// genericclioptions.ConfigFlags. Output goes to streams; errors are printed
// once, as "error: …" on streams.ErrOut, and Execute returns them.
func NewCmdKarpx(streams genericiooptions.IOStreams) *cobra.Command {
	configFlags := genericclioptions.NewConfigFlags(true)
	return newCmdKarpx(cluster.NewFactory(configFlags, streams.ErrOut), configFlags, streams)
}

// newCmdKarpx builds the root command around f, which tests replace with a
// cluster.StaticFactory; configFlags are bound to the persistent flags (nil
// binds none).
func newCmdKarpx(f cluster.Factory, configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:     "karpx",
		Short:   "Inspect Karpenter NodePools, NodeClaims and EC2NodeClasses",
		Long:    rootLong,
		Example: rootExample,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: displayName,
		},
		// Errors are runtime failures far more often than usage mistakes;
		// flag errors get a pointer to --help from SetFlagErrorFunc.
		SilenceUsage: true,
		// kubectl plugins are completed by kubectl_complete-karpx calling
		// `kubectl karpx __complete`; the "completion" subcommand would
		// produce scripts for a "karpx" executable, which does not exist.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetErrPrefix("error:")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nSee '%s --help' for usage", err, c.CommandPath())}
	})
	if configFlags != nil {
		configFlags.AddFlags(root.PersistentFlags())
	}

	namespace := func() (string, bool, error) { return corev1.NamespaceDefault, false, nil }
	if configFlags != nil {
		// Resolved when called, after the flags are parsed: ConfigFlags
		// caches the loader on first use.
		namespace = func() (string, bool, error) { return configFlags.ToRawKubeConfigLoader().Namespace() }
	}
	root.AddCommand(
		status.NewCmd(f, streams),
		explain.NewCmd(f, namespace, streams),
		lint.NewCmd(streams),
		audit.NewCmd(f, streams),
		nodeclaims.NewCmd(f, streams),
		throttle.NewCmd(f, streams),
		capacity.NewCmd(f, streams),
		newCmdVersion(f, streams),
	)
	return root
}
