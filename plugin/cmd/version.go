package cmd

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/plugin"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
)

// VersionKind is the kind `kubectl karpx version -o json|yaml` prints, with
// apiVersion output.APIVersion (karpx.io/v1alpha1).
const VersionKind = "Version"

// VersionInfo is what `kubectl karpx version -o json|yaml` prints (with
// apiVersion and kind added).
type VersionInfo struct {
	// PluginVersion is plugin.Version, the kubectl-karpx build's version.
	PluginVersion string `json:"pluginVersion"`
	// PluginGoVersion and PluginPlatform describe the build: "go1.26.8",
	// "linux/amd64".
	PluginGoVersion string `json:"pluginGoVersion"`
	PluginPlatform  string `json:"pluginPlatform"`
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
	// Print holds -o: "" prints "Plugin Version: …" lines, wide adds the
	// Go version, platform and the server's commit, json and yaml print a
	// karpx.io/v1alpha1 Version; name is refused.
	Print *output.Flags
}

// NewVersionOptions returns VersionOptions that read through f and write to
// streams.
func NewVersionOptions(f cluster.Factory, streams genericiooptions.IOStreams) *VersionOptions {
	return &VersionOptions{IOStreams: streams, Factory: f, Print: output.NewFlags(false)}
}

func newCmdVersion(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewVersionOptions(f, streams)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin version and the Kubernetes server version",
		Example: `  # Plugin and server versions
  kubectl karpx version

  # Plugin version only, without contacting the server
  kubectl karpx version --client

  # With Go versions, platforms and the server's commit
  kubectl karpx version -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.ClientOnly, "client", o.ClientOnly, "Print the plugin version only; don't contact the server.")
	o.Print.AddFlags(cmd, false)
	return cmd
}

// Validate rejects -o values other than "", wide, json and yaml with an
// *output.UnsupportedError.
func (o *VersionOptions) Validate() error {
	_, err := o.Print.ToPrinter()
	return err
}

// Run prints the versions. As text it prints "Plugin Version: …" and then
// "Server Version: …"; when the server cannot be reached the plugin version
// is still printed and the discovery error is returned.
func (o *VersionOptions) Run(_ context.Context) error {
	info := VersionInfo{PluginVersion: plugin.Version, PluginGoVersion: runtime.Version(), PluginPlatform: runtime.GOOS + "/" + runtime.GOARCH}
	var serverErr error
	if !o.ClientOnly {
		info.ServerVersion, serverErr = o.serverVersion()
	}
	printed, err := o.Print.PrintObject(o.Out, VersionKind, &info)
	if err != nil {
		return err
	}
	if printed {
		return serverErr
	}
	wide := o.Print.IsWide()
	fmt.Fprintf(o.Out, "Plugin Version: %s", info.PluginVersion)
	if wide {
		fmt.Fprintf(o.Out, " (%s, %s)", info.PluginGoVersion, info.PluginPlatform)
	}
	fmt.Fprintln(o.Out)
	if s := info.ServerVersion; s != nil {
		fmt.Fprintf(o.Out, "Server Version: %s", s.GitVersion)
		if wide {
			fmt.Fprintf(o.Out, " (%s, %s, commit %s)", s.GoVersion, s.Platform, s.GitCommit)
		}
		fmt.Fprintln(o.Out)
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
