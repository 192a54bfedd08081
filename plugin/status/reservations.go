package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/plugin/table"
)

// reservationColumns are the columns of the "Capacity reservations"
// table: one row per entry of an EC2NodeClass's
// status.capacityReservations.
var reservationColumns = []metav1.TableColumnDefinition{
	{Name: "EC2NodeClass", Type: "string", Format: "name", Description: "The EC2NodeClass whose status lists the reservation."},
	{Name: "ID", Type: "string", Description: "The capacity reservation's id."},
	{Name: "Type", Type: "string", Description: "default (an on-demand capacity reservation) or capacity-block."},
	table.InstanceType, table.Zone,
	{Name: "Available", Type: "string", Description: "Free places / instances the reservation holds, as the karpx controller counts them (EC2's AvailableInstanceCount and TotalInstanceCount, less its launches since); ? when the controller's count is unavailable."},
	{Name: "End", Type: "string", Description: "When the reservation ends (UTC), and the time left; - for none."},
	{Name: "State", Type: "string", Description: "active, or expiring (a Capacity Block within 40 minutes of its end); FULL when it has no free place."},
}

// reservationTable returns a row per capacity reservation of classes'
// status (sorted by EC2NodeClass, then id), with the controller's counts
// from rep (nil: unknown).
func reservationTable(classes []karpxv1.EC2NodeClass, rep *reservationreport.Report, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: reservationColumns}
	slices.SortFunc(classes, func(a, b karpxv1.EC2NodeClass) int { return strings.Compare(a.Name, b.Name) })
	for i := range classes {
		c := &classes[i]
		for _, cr := range c.Status.CapacityReservations {
			avail, state := "?", cr.State
			if state == "" {
				state = "active"
			}
			if r, ok := rep.Find(cr.ID); ok {
				avail = fmt.Sprintf("%d/%d", r.Available, r.Total)
				if r.Available == 0 {
					state += ", FULL"
				}
			}
			end := "-"
			if cr.EndTime != nil {
				end = cr.EndTime.UTC().Format(time.RFC3339)
				if left := cr.EndTime.Sub(now); left > 0 {
					end += " (in " + left.Round(time.Minute).String() + ")"
				} else {
					end += " (ended)"
				}
			}
			rtype := cr.ReservationType
			if rtype == "" {
				rtype = "default"
			}
			t.Rows = append(t.Rows, metav1.TableRow{
				Cells:  []any{c.Name, cr.ID, rtype, cr.InstanceType, cr.AvailabilityZone, avail, end, state},
				Object: runtime.RawExtension{Object: c},
			})
		}
	}
	return t
}

// printReservations adds the "Capacity reservations" table under the
// others: the EC2NodeClasses' status.capacityReservations (written by the
// controller with the ReservedCapacity feature gate), with free and total
// places from the controller's report (reservationreport.HandlerPath)
// when it answers. Nothing when no EC2NodeClass lists one; EC2NodeClasses
// that cannot be listed are one line on stderr.
func (o *Options) printReservations(ctx context.Context) error {
	var classes karpxv1.EC2NodeClassList
	if err := o.client.List(ctx, &classes); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil // no EC2NodeClass CRD: no reservations
		}
		fmt.Fprintf(o.ErrOut, "Capacity reservations unavailable: listing EC2NodeClasses: %v\n", err)
		return nil
	}
	listed := false
	for _, c := range classes.Items {
		listed = listed || len(c.Status.CapacityReservations) > 0
	}
	if !listed {
		return nil
	}
	var rep *reservationreport.Report
	o.fromController(ctx, func(ctx context.Context) {
		r := &reservationreport.Report{}
		err := FetchJSON(ctx, o.Budget, reservationreport.HandlerPath, r)
		switch {
		case endpointAbsent(err):
		case err != nil:
			fmt.Fprintf(o.ErrOut, "Capacity reservation counts unavailable: %v\n", err)
		default:
			rep = r
		}
	})
	fmt.Fprintln(o.Out, "\nCapacity reservations (EC2NodeClass status.capacityReservations):")
	return o.tables().Print(o.Out, reservationTable(classes.Items, rep, o.Now()))
}
