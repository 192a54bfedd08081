package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpx/karpx/autoscaler/providers/hydration"
)

var dataSetColumns = []metav1.TableColumnDefinition{
	{Name: "Data-Set", Type: "string", Description: "Cloud data the controller depends on (instance-types, offerings, spot-prices, subnets, security-groups, amis)."},
	{Name: "Hydrated", Type: "string", Description: "True once one refresh succeeded; readiness waits for the required sets."},
	{Name: "Age", Type: "string", Description: "Time since the last successful refresh."},
	{Name: "Items", Type: "integer", Description: "Items in the last good answer."},
	{Name: "Last-Error", Type: "string", Description: "Error of the last failed refresh since the last success (<none> when it succeeded)."},
}

// fetchDataSets reads the controller's hydration report
// (hydration.HandlerPath) from the same source as the budget line: the
// service proxy, or --budget-endpoint with its path replaced.
func (o *Options) fetchDataSets(ctx context.Context) (*hydration.Report, error) {
	var raw []byte
	if o.Budget.Endpoint != "" {
		u, err := url.Parse(o.Budget.Endpoint)
		if err != nil {
			return nil, err
		}
		u.Path = hydration.HandlerPath
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", u, resp.Status)
		}
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, err
		}
	} else {
		dc, err := o.Factory.Discovery()
		if err != nil {
			return nil, err
		}
		path := fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%s/proxy%s", o.Budget.Namespace, o.Budget.Service, o.Budget.Port, hydration.HandlerPath)
		if raw, err = dc.RESTClient().Get().AbsPath(path).DoRaw(ctx); err != nil {
			return nil, err
		}
	}
	var rep hydration.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("decoding the data-set report: %w", err)
	}
	return &rep, nil
}

// printDataSets prints the controller's cloud data sets under the tables.
// Like the budget line, a missing controller prints nothing and any other
// failure is one line on stderr.
func (o *Options) printDataSets(ctx context.Context) {
	if o.Budget == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rep, err := o.fetchDataSets(ctx)
	var status apierrors.APIStatus
	switch {
	case err != nil && errors.As(err, &status) && apierrors.IsNotFound(err):
		return
	case err != nil:
		fmt.Fprintf(o.ErrOut, "cloud data sets unavailable: %v\n", err)
		return
	case len(rep.DataSets) == 0:
		return
	}
	fmt.Fprintln(o.Out)
	if err := o.printTable(dataSetTable(rep.DataSets, o.Now()), o.Out); err != nil {
		fmt.Fprintf(o.ErrOut, "printing data sets: %v\n", err)
	}
}

// dataSetTable is the data-set table, ages measured at now.
func dataSetTable(sets []hydration.State, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: dataSetColumns}
	for i := range sets {
		s := sets[i]
		hydrated, ageCell := "False", none
		if s.Hydrated {
			hydrated, ageCell = "True", age(metav1.NewTime(s.HydratedAt), now)
		}
		if s.Required {
			hydrated += " (required)"
		}
		lastErr := none
		if s.LastError != "" {
			lastErr = strings.ReplaceAll(s.LastError, "\n", " ")
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{s.Name, hydrated, ageCell, int64(s.Items), lastErr},
			Object: runtime.RawExtension{},
		})
	}
	return t
}
