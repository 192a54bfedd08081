package cluster

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Factory builds the clients a subcommand needs. Implementations read their
// configuration lazily, when a method is called, so a Factory can be created
// before the command line is parsed.
type Factory interface {
	// Client returns a controller-runtime client for the cluster that
	// kubectl's global flags select. Its scheme is Scheme(). The error is
	// the one from loading the kubeconfig or building the client; no request
	// is sent to the server.
	Client() (client.Client, error)
	// Discovery returns a discovery client for the same cluster, used for
	// the server version and served API groups.
	Discovery() (discovery.DiscoveryInterface, error)
	// Scheme returns the scheme the Client's objects are typed with; it
	// knows the kinds listed on NewScheme.
	Scheme() *runtime.Scheme
}

// NewFactory returns a Factory that reads kubectl's global flags from flags
// (typically genericclioptions.ConfigFlags, bound to the root command) and
// writes the server's deprecation and other warnings to warnings, prefixed
// "Warning: " as kubectl does. A nil warnings drops them.
func NewFactory(flags genericclioptions.RESTClientGetter, warnings io.Writer) Factory {
	return &flagsFactory{flags: flags, warnings: warnings, scheme: NewScheme()}
}

type flagsFactory struct {
	flags    genericclioptions.RESTClientGetter
	warnings io.Writer
	scheme   *runtime.Scheme
}

func (f *flagsFactory) Scheme() *runtime.Scheme { return f.scheme }

func (f *flagsFactory) Client() (client.Client, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if f.warnings != nil {
		cfg.WarningHandler = rest.NewWarningWriter(f.warnings, rest.WarningWriterOptions{Deduplicate: true})
	} else {
		cfg.WarningHandler = rest.NoWarnings{}
	}
	// kubectl's deferred discovery mapper caches discovery under --cache-dir
	// and refreshes it when a kind is missing, so newly installed CRDs are
	// found without waiting for the cache to expire.
	mapper, err := f.flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: f.scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	return c, nil
}

func (f *flagsFactory) Discovery() (discovery.DiscoveryInterface, error) {
	return f.flags.ToDiscoveryClient()
}

// StaticFactory is a Factory that returns clients built beforehand, for
// tests and for callers that already hold clients. A nil field makes the
// matching method return an error rather than a nil client.
type StaticFactory struct {
	// ClientValue is returned by Client.
	ClientValue client.Client
	// DiscoveryValue is returned by Discovery.
	DiscoveryValue discovery.DiscoveryInterface
	// SchemeValue is returned by Scheme; nil means a NewScheme().
	SchemeValue *runtime.Scheme
}

// Client returns f.ClientValue, or an error when it is nil.
func (f *StaticFactory) Client() (client.Client, error) {
	if f.ClientValue == nil {
		return nil, fmt.Errorf("no Kubernetes client configured")
	}
	return f.ClientValue, nil
}

// Discovery returns f.DiscoveryValue, or an error when it is nil.
func (f *StaticFactory) Discovery() (discovery.DiscoveryInterface, error) {
	if f.DiscoveryValue == nil {
		return nil, fmt.Errorf("no discovery client configured")
	}
	return f.DiscoveryValue, nil
}

// Scheme returns f.SchemeValue, or a new NewScheme() when it is nil.
func (f *StaticFactory) Scheme() *runtime.Scheme {
	if f.SchemeValue == nil {
		f.SchemeValue = NewScheme()
	}
	return f.SchemeValue
}
