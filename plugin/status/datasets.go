package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpx/karpx/autoscaler/aws/hydration"
	"github.com/karpx/karpx/plugin/table"
	"github.com/karpx/karpx/plugin/throttle"
)

var dataSetColumns = []metav1.TableColumnDefinition{
	{Name: "Data-Set", Type: "string", Description: "Cloud data the controller depends on (instance-types, offerings, spot-prices, subnets, security-groups, amis)."},
	{Name: "Hydrated", Type: "string", Description: "True once one refresh succeeded; readiness waits for the required sets."},
	{Name: "Age", Type: "string", Description: "Time since the last successful refresh."},
	{Name: "Items", Type: "integer", Description: "Items in the last good answer."},
	{Name: "Last-Error", Type: "string", Description: "Error of the last failed refresh since the last success (<none> when it succeeded)."},
}

// FetchJSON reads path (for example hydration.HandlerPath) from the karpx
// controller that conn points at, as `kubectl karpx throttle` reads
// /throttle: from conn.Endpoint with its path replaced when set, else
// through the API server's service proxy to conn's Service, and decodes the
// JSON answer into into. Errors are throttle.Options.ReadProxy's
// (*throttle.ServiceNotFoundError when the Service is missing) or name the
// URL.
func FetchJSON(ctx context.Context, conn *throttle.Options, path string, into any) error {
	var raw []byte
	if conn.Endpoint != "" {
		u, err := url.Parse(conn.Endpoint)
		if err != nil {
			return err
		}
		u.Path = path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		client := conn.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 30 * time.Second}
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", u, resp.Status)
		}
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20)); err != nil {
			return err
		}
	} else {
		var err error
		if raw, err = conn.ReadProxy(ctx, path); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decoding %s: %w (is it a karpx controller?)", path, err)
	}
	return nil
}

// endpointAbsent reports whether err, from FetchJSON, means the section
// has no source: the controller's Service is missing
// (*throttle.ServiceNotFoundError), or the controller answers 404 for the
// page (upstream Karpenter, or a karpx without it). The section is then
// left out rather than reported as a failure.
func endpointAbsent(err error) bool {
	var (
		status  apierrors.APIStatus
		missing *throttle.ServiceNotFoundError
	)
	return errors.As(err, &missing) || err != nil && errors.As(err, &status) && apierrors.IsNotFound(err)
}

// printDataSets prints the controller's cloud data sets under the tables.
// Like the budget line, a missing controller prints nothing and any other
// failure is one line on stderr.
func (o *Options) printDataSets(ctx context.Context) {
	rep := &hydration.Report{}
	err := FetchJSON(ctx, o.Budget, hydration.HandlerPath, rep)
	switch {
	case endpointAbsent(err):
		return
	case err != nil:
		fmt.Fprintf(o.ErrOut, "cloud data sets unavailable: %v\n", err)
		return
	case len(rep.DataSets) == 0:
		return
	}
	fmt.Fprintln(o.Out)
	if err := o.tables().Print(o.Out, dataSetTable(rep.DataSets, o.Now())); err != nil {
		fmt.Fprintf(o.ErrOut, "printing data sets: %v\n", err)
	}
}

// dataSetTable is the data-set table, ages measured at now.
func dataSetTable(sets []hydration.State, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: dataSetColumns}
	for i := range sets {
		s := sets[i]
		hydrated, ageCell := "False", table.None
		if s.Hydrated {
			hydrated, ageCell = "True", table.Since(s.HydratedAt, now)
		}
		if s.Required {
			hydrated += " (required)"
		}
		lastErr := table.OrNone(table.OneLine(s.LastError))
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{s.Name, hydrated, ageCell, int64(s.Items), lastErr},
			Object: runtime.RawExtension{},
		})
	}
	return t
}
