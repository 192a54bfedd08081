package throttle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/karpx/karpx/autoscaler/aws/budget/budgetstatus"
	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
	"github.com/karpx/karpx/plugin/runner"
)

// Defaults of the controller's Service, as in manifests/controller/service.yaml:
// DefaultPort is its plain-HTTP status port (the controller's
// --status-bind-address, default :8082), not the metrics port, which is
// authenticated by default and which the service proxy cannot pass a
// user's token to.
const (
	DefaultNamespace = "karpx"
	DefaultService   = "karpx-controller"
	DefaultPort      = "status"
)

// StatusKind is the kind -o json and -o yaml print the budget as, with
// apiVersion output.APIVersion (karpx.io/v1alpha1).
const StatusKind = "EC2APIBudget"

const throttleLong = `Show the karpx controller's client-side EC2 API budget.

karpx takes a token from a client-side bucket before every EC2 and SSM call
and every SDK retry, at a fraction of AWS's documented request rates, so it
cannot exhaust the account's API budget. The table shows, per throttling
category: the size and refill rate (requests per second) of each bucket, the
tokens left in the emptiest one, and since the controller started the
requests sent, the throttled answers (RequestLimitExceeded), the SDK retries
and the 99th percentile of the client-side wait. -o wide adds errors, SDK
retry-quota errors and refused speculative calls, and a table per action.

The status is read through the API server's service proxy
(/api/v1/namespaces/NAMESPACE/services/SERVICE:PORT/proxy/throttle), which
needs RBAC "get" on "services/proxy" (Role karpx-throttle-reader); --endpoint
reads a controller's status address directly instead.`

const throttleExample = `  # Budget of the controller installed from manifests/controller
  kubectl karpx throttle

  # With one row per action
  kubectl karpx throttle -o wide

  # A controller in another namespace, as JSON
  kubectl karpx throttle -n kube-system --service karpx -o json

  # A controller running locally with --status-bind-address :8082
  kubectl karpx throttle --endpoint http://127.0.0.1:8082`

// Options are the inputs of `kubectl karpx throttle`. NewOptions fills in
// the defaults; Complete, Validate and Run are called in that order.
type Options struct {
	genericiooptions.IOStreams

	// Factory provides the REST client of the API server (its discovery
	// client's).
	Factory cluster.Factory
	// Print holds -o ("" and "wide" print tables, json and yaml an
	// EC2APIBudget object) and --no-headers, which omits the summary line
	// and the tables' header rows.
	Print *output.Flags
	// Namespace is the controller Service's namespace: kubectl's
	// -n/--namespace when given, else DefaultNamespace.
	Namespace string
	// Service is the controller Service's name (--service).
	Service string
	// Port is the name or number of the Service port serving /throttle
	// (--port).
	Port string
	// Endpoint, when set, is the controller URL to read instead of the
	// service proxy (--endpoint), e.g. "http://127.0.0.1:8082"; a URL
	// without a path gets /throttle.
	Endpoint string
	// HTTPClient reads Endpoint. Nil means a client with a 30s timeout.
	HTTPClient *http.Client
}

// NewOptions returns Options that write to streams and read through f.
func NewOptions(f cluster.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{IOStreams: streams, Factory: f, Service: DefaultService, Port: DefaultPort, Print: output.NewFlags(false)}
}

// NewCmd returns the `throttle` command, reading through f and writing to
// streams.
func NewCmd(f cluster.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:     "throttle [--endpoint URL] [-o wide|json|yaml]",
		Short:   "Show the controller's client-side EC2 API budget: buckets, throttling, retries",
		Long:    throttleLong,
		Example: throttleExample,
		Args:    cobra.NoArgs,
		RunE:    runner.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds -o/--output, --no-headers, --service, --port and
// --endpoint to o.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd, true)
	cmd.Flags().StringVar(&o.Service, "service", o.Service, "Name of the controller's Service.")
	cmd.Flags().StringVar(&o.Port, "port", o.Port, "Name or number of the Service port that serves /throttle (the controller's status port).")
	cmd.Flags().StringVar(&o.Endpoint, "endpoint", o.Endpoint, "Read the status from this controller URL (its --status-bind-address) instead of the API server's service proxy, e.g. http://127.0.0.1:8082.")
}

// Complete takes the namespace from kubectl's -n/--namespace when it was
// given (the Service lives in "karpx" otherwise, whatever the kubeconfig
// context's namespace).
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	if f := cmd.Flag("namespace"); f != nil && f.Changed {
		o.Namespace = f.Value.String()
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	return nil
}

// Validate checks -o (an *output.UnsupportedError), the Service
// coordinates and --endpoint.
func (o *Options) Validate() error {
	if o.Print != nil {
		if _, err := o.Print.ToPrinter(); err != nil {
			return err
		}
	}
	return o.ValidateSource()
}

// ValidateSource checks the Service coordinates and --endpoint.
func (o *Options) ValidateSource() error {
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("invalid --endpoint %q: want an http(s) URL such as http://127.0.0.1:8082", o.Endpoint)
		}
		return nil
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("invalid namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(o.Service); len(errs) > 0 {
		return fmt.Errorf("invalid --service %q: %s", o.Service, strings.Join(errs, "; "))
	}
	if n, err := strconv.Atoi(o.Port); err == nil {
		if errs := validation.IsValidPortNum(n); len(errs) > 0 {
			return fmt.Errorf("invalid --port %q: %s", o.Port, strings.Join(errs, "; "))
		}
	} else if errs := validation.IsValidPortName(o.Port); len(errs) > 0 {
		return fmt.Errorf("invalid --port %q: %s", o.Port, strings.Join(errs, "; "))
	}
	return nil
}

// Fetch reads the budget status from --endpoint or through the API
// server's service proxy. It returns *ServiceNotFoundError when the
// controller's Service does not exist (for example on a cluster running
// upstream Karpenter), and other errors naming the source and the fix.
func (o *Options) Fetch(ctx context.Context) (*budgetstatus.Status, error) {
	var (
		raw []byte
		err error
	)
	if o.Endpoint != "" {
		raw, err = o.readEndpoint(ctx)
	} else {
		raw, err = o.ReadProxy(ctx, budgetstatus.Path)
	}
	if err != nil {
		return nil, err
	}
	var st budgetstatus.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decoding the budget status from %s: %w (is it a karpx controller?)", o.source(), err)
	}
	return &st, nil
}

// ServiceNotFoundError reports that the controller's Service is missing.
type ServiceNotFoundError struct{ msg string }

func (e *ServiceNotFoundError) Error() string { return e.msg }

// Run reads the status and prints it.
func (o *Options) Run(ctx context.Context) error {
	st, err := o.Fetch(ctx)
	if err != nil {
		return err
	}
	if printed, err := o.Print.PrintObject(o.Out, StatusKind, st); printed || err != nil {
		return err
	}
	return o.printTables(st)
}

// source names where the status is read from, for errors.
func (o *Options) source() string {
	if o.Endpoint != "" {
		return o.Endpoint
	}
	return fmt.Sprintf("service %s/%s port %s", o.Namespace, o.Service, o.Port)
}

// ReadProxy reads path (e.g. "/throttle") from the controller's Service
// through the API server's service proxy. It returns
// *ServiceNotFoundError when the Service does not exist, and errors naming
// the fix when the path is not served, no endpoint is ready or RBAC
// forbids the proxy.
func (o *Options) ReadProxy(ctx context.Context, path string) ([]byte, error) {
	dc, err := o.Factory.Discovery()
	if err != nil {
		return nil, err
	}
	proxyPath := fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%s/proxy%s", o.Namespace, o.Service, o.Port, path)
	raw, err := dc.RESTClient().Get().AbsPath(proxyPath).DoRaw(ctx)
	if err == nil {
		return raw, nil
	}
	switch {
	case apierrors.IsNotFound(err) && missingService(err, raw):
		return nil, &ServiceNotFoundError{fmt.Sprintf("service %q not found in namespace %q: install the controller's Service (kubectl apply -f manifests/controller/service.yaml), "+
			"name another with -n/--namespace and --service, or read a controller directly with --endpoint URL", o.Service, o.Namespace)}
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%s does not serve %s: check --port (the controller's status port, default \"status\") and that the controller runs a karpx version that serves it: %w",
			o.source(), path, err)
	case apierrors.IsServiceUnavailable(err):
		return nil, fmt.Errorf("%s has no ready endpoint: is the karpx controller running? (kubectl -n %s get pods -l app.kubernetes.io/name=%s); "+
			"a controller installed before the status port existed serves this on --port metrics: %w",
			o.source(), o.Namespace, o.Service, err)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w (reading %s needs RBAC \"get\" on \"services/proxy\" in namespace %s, or use --endpoint)", err, path, o.Namespace)
	}
	return nil, fmt.Errorf("reading %s from %s: %w", path, o.source(), err)
}

// missingService reports whether a NotFound answer of the service proxy is
// the API server's own (the Service does not exist) rather than the
// controller's: its Status names kind "services". The REST client does not
// always decode the Status of a proxy path, so body, the raw answer, is
// read too.
func missingService(err error, body []byte) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "services" {
		return true
	}
	var st metav1.Status
	return json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Details != nil && st.Details.Kind == "services"
}

func (o *Options) readEndpoint(ctx context.Context) ([]byte, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil {
		return nil, err
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = budgetstatus.Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the EC2 API budget from %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the EC2 API budget from %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the EC2 API budget from %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
