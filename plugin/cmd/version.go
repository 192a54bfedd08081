package cmd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/plugin"
	"github.com/karpx/karpx/plugin/cluster"
)

// VersionInfo is what `kubectl karpx version -o json|yaml` prints.
type VersionInfo struct {
	// PluginVersion is plugin.Version, the kubectl-karpx build's version.
	PluginVersion string `json:"pluginVersion"`
	// ServerVersion is the API server's /version, absent with --client.
	ServerVersion *version.Info `json:"serverVersion,omitempty"`
}

// VersionOptions are the inputs of `kubectl karpx version`.
type VersionOptions struct {
	genericiooptions.IOStreams

	// Factory gives the discovery client that reads the server version.
	Factory cluster.Factory
	// ClientOnly skips the server (--client).
	ClientOnly bool
	// Output is "" for text, or "json" or "yaml" (-o).
	Output string
}

// NewVersionOptions returns VersionOptions that read through f and write to
// streams.
func NewVersionOptions(f cluster.Factory, streams genericiooptions.IOStreams) *VersionOptions {
	return &VersionOptions{IOStreams: streams, Factory: f}
}

func newCmdVersion(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewVersionOptions(f, streams)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin version and the Kubernetes server version",
		Example: `  # Plugin and server versions
  kubectl karpx version

  # Plugin version only, without contacting the server
  kubectl karpx version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.ClientOnly, "client", o.ClientOnly, "Print the plugin version only; don't contact the server.")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format. One of: (json, yaml).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Validate rejects -o values other than "", "json" and "yaml".
func (o *VersionOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output must be 'yaml' or 'json'")
}

// Run prints the versions. As text it prints "Plugin Version: …" and then
// "Server Version: …"; when the server cannot be reached the plugin version
// is still printed and the discovery error is returned.
func (o *VersionOptions) Run(_ context.Context) error {
	info := VersionInfo{PluginVersion: plugin.Version}
	var serverErr error
	if !o.ClientOnly {
		info.ServerVersion, serverErr = o.serverVersion()
	}

	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(o.Out, string(b))
	case "yaml":
		b, err := yaml.Marshal(info)
		if err != nil {
			return err
		}
		fmt.Fprint(o.Out, string(b))
	default:
		fmt.Fprintf(o.Out, "Plugin Version: %s\n", info.PluginVersion)
		if info.ServerVersion != nil {
			fmt.Fprintf(o.Out, "Server Version: %s\n", info.ServerVersion.GitVersion)
		}
	}
	return serverErr
}

func (o *VersionOptions) serverVersion() (*version.Info, error) {
	d, err := o.Factory.Discovery()
	if err != nil {
		return nil, err
	}
	return d.ServerVersion()
}
