package throttle

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpx/karpx/autoscaler/aws/budget/budgetstatus"
	"github.com/karpx/karpx/plugin/table"
)

// categoryColumns are the table of one row per throttling category; -o
// wide adds the error counters.
var categoryColumns = []metav1.TableColumnDefinition{
	table.Category, table.Bucket, table.Refill, table.Tokens, table.Rate, table.Requests, table.Throttled, table.Retries, table.WaitP99,
	table.Wide(table.Errors), table.Wide(table.QuotaErrors), table.Wide(table.Exhausted),
}

// actionColumns are the -o wide table of one row per bucket.
var actionColumns = []metav1.TableColumnDefinition{
	{Name: "Action", Type: "string", Description: "EC2 or SSM action."},
	table.Category, table.Bucket, table.Refill, table.Tokens, table.Rate, table.Requests, table.Throttled, table.Retries,
	table.Errors, table.QuotaErrors, table.Exhausted, table.WaitP50, table.WaitP99,
}

func (o *Options) printTables(st *budgetstatus.Status) error {
	wide := o.Print.IsWide()
	if !o.Print.NoHeaders {
		if st.Enabled {
			fmt.Fprintf(o.Out, "EC2 API budget: %s of AWS's documented request rates, %d requests, %d throttled, %d retry-quota errors.\n\n",
				percent(st.Fraction), st.Totals.Requests, st.Totals.Throttled, st.Totals.QuotaErrors)
		} else {
			fmt.Fprintf(o.Out, "EC2 API budget: DISABLED, calls are not rate limited client-side (a controller older than this plugin, started with --aws-api-budget-disabled); %d requests, %d throttled, %d retry-quota errors.\n\n",
				st.Totals.Requests, st.Totals.Throttled, st.Totals.QuotaErrors)
		}
	}
	p := o.Print.Tables()
	if err := p.Print(o.Out, categoryTable(st)); err != nil {
		return err
	}
	if !wide {
		return nil
	}
	fmt.Fprintln(o.Out)
	return p.Print(o.Out, actionTable(st))
}

func categoryTable(st *budgetstatus.Status) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: categoryColumns}
	for _, c := range st.Categories {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			string(c.Category), number(c.Size), number(c.RefillPerSecond), tokens(c.Tokens, st.Enabled), adaptive(c.AdaptiveFactor, c.Slowdowns, st.Enabled),
			c.Requests, c.Throttled, c.Retries, seconds(c.WaitP99Seconds),
			c.Errors, c.QuotaErrors, c.Exhausted,
		}})
	}
	return t
}

func actionTable(st *budgetstatus.Status) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: actionColumns}
	for _, a := range st.Actions {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			a.Action, string(a.Category), number(a.Size), number(a.RefillPerSecond), tokens(a.Tokens, st.Enabled), adaptive(a.Adaptive.Factor, a.Adaptive.Slowdowns, st.Enabled),
			a.Requests, a.Throttled, a.Retries, a.Errors, a.QuotaErrors, a.Exhausted,
			seconds(a.WaitP50Seconds), seconds(a.WaitP99Seconds),
		}})
	}
	return t
}

// number prints 50, 2.5, 0.25.
func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// tokens prints a token count with one decimal, "-" when buckets are off.
func tokens(v float64, enabled bool) string {
	if !enabled {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// adaptive prints a bucket's adaptation: "100%" when it runs at its
// configured rate, "25% (3 slow-downs)" or "50% (1 slow-down)" after throttled answers, "-" when
// buckets are off or the controller reports none.
func adaptive(factor float64, slowdowns int64, enabled bool) string {
	if !enabled || factor <= 0 {
		return "-"
	}
	out := strconv.FormatFloat(100*factor, 'f', 0, 64) + "%"
	switch {
	case slowdowns == 1:
		out += " (1 slow-down)"
	case slowdowns > 1:
		out += fmt.Sprintf(" (%d slow-downs)", slowdowns)
	}
	return out
}

// seconds prints a wait as a duration rounded to the millisecond: 0s,
// 120ms, 2.4s.
func seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
}

// percent prints 0.5 as "50%".
func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }
