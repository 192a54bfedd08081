package throttle

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
)

var categoryColumns = []metav1.TableColumnDefinition{
	{Name: "Category", Type: "string", Description: "EC2 throttling category (SSM GetParameter has its own)."},
	{Name: "Bucket", Type: "string", Description: "Size of each client-side bucket of the category, in requests."},
	{Name: "Refill/s", Type: "string", Description: "Refill rate of each bucket, in requests per second."},
	{Name: "Tokens", Type: "string", Description: "Tokens left in the category's emptiest bucket."},
	{Name: "Rate", Type: "string", Description: "Share of its configured rate the category's slowest bucket runs at after RequestLimitExceeded answers, and the number of slow-downs."},
	{Name: "Requests", Type: "integer", Description: "Calls sent to AWS since the controller started."},
	{Name: "Throttled", Type: "integer", Description: "Throttled answers (RequestLimitExceeded and other throttle codes)."},
	{Name: "Retries", Type: "integer", Description: "SDK attempts beyond the first."},
	{Name: "Wait-P99", Type: "string", Description: "99th percentile of the client-side wait for a token (recent calls)."},
	{Name: "Errors", Type: "integer", Priority: 1, Description: "Failed calls."},
	{Name: "Quota-Errors", Type: "integer", Priority: 1, Description: "Calls failed with the SDK's 'retry quota exceeded'."},
	{Name: "Exhausted", Type: "integer", Priority: 1, Description: "Speculative calls refused client-side (never sent)."},
}

var actionColumns = []metav1.TableColumnDefinition{
	{Name: "Action", Type: "string", Description: "EC2 or SSM action."},
	{Name: "Category", Type: "string", Description: "Throttling category of the action's bucket."},
	{Name: "Bucket", Type: "string", Description: "Size of the bucket, in requests."},
	{Name: "Refill/s", Type: "string", Description: "Refill rate, in requests per second."},
	{Name: "Tokens", Type: "string", Description: "Tokens left."},
	{Name: "Rate", Type: "string", Description: "Share of the configured rate the bucket runs at after RequestLimitExceeded answers, and the number of slow-downs."},
	{Name: "Requests", Type: "integer", Description: "Calls sent to AWS."},
	{Name: "Throttled", Type: "integer", Description: "Throttled answers."},
	{Name: "Retries", Type: "integer", Description: "SDK attempts beyond the first."},
	{Name: "Errors", Type: "integer", Description: "Failed calls."},
	{Name: "Quota-Errors", Type: "integer", Description: "Calls failed with 'retry quota exceeded'."},
	{Name: "Exhausted", Type: "integer", Description: "Speculative calls refused client-side."},
	{Name: "Wait-P50", Type: "string", Description: "Median client-side wait."},
	{Name: "Wait-P99", Type: "string", Description: "99th percentile client-side wait."},
}

func (o *Options) printTables(st *Status) error {
	wide := o.Print.IsWide()
	if !o.Print.NoHeaders {
		if st.Enabled {
			fmt.Fprintf(o.Out, "EC2 API budget: %s of AWS's documented request rates, %d requests, %d throttled, %d retry-quota errors.\n\n",
				percent(st.Fraction), st.Totals.Requests, st.Totals.Throttled, st.Totals.QuotaErrors)
		} else {
			fmt.Fprintf(o.Out, "EC2 API budget: DISABLED, calls are not rate limited client-side (--aws-api-budget-disabled); %d requests, %d throttled, %d retry-quota errors.\n\n",
				st.Totals.Requests, st.Totals.Throttled, st.Totals.QuotaErrors)
		}
	}
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: wide, NoHeaders: o.Print.NoHeaders})
	if err := p.PrintObj(categoryTable(st), o.Out); err != nil {
		return err
	}
	if !wide {
		return nil
	}
	fmt.Fprintln(o.Out)
	return p.PrintObj(actionTable(st), o.Out)
}

func categoryTable(st *Status) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: categoryColumns}
	for _, c := range st.Categories {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			c.Category, number(c.Size), number(c.RefillPerSecond), tokens(c.Tokens, st.Enabled), adaptive(c.AdaptiveFactor, c.Slowdowns, st.Enabled),
			c.Requests, c.Throttled, c.Retries, seconds(c.WaitP99Seconds),
			c.Errors, c.QuotaErrors, c.Exhausted,
		}})
	}
	return t
}

func actionTable(st *Status) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: actionColumns}
	for _, a := range st.Actions {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			a.Action, a.Category, number(a.Size), number(a.RefillPerSecond), tokens(a.Tokens, st.Enabled), adaptive(a.Adaptive.Factor, a.Adaptive.Slowdowns, st.Enabled),
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
