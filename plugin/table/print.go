package table

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
)

// Printer prints tables with kubectl's -o wide and --no-headers.
type Printer struct {
	// Wide shows the priority-1 columns (-o wide).
	Wide bool
	// NoHeaders omits the header rows (--no-headers).
	NoHeaders bool
}

// Print writes t to w through cli-runtime's table printer. It returns the
// printer's error (a cell of a type it cannot print, or a write error).
func (p Printer) Print(w io.Writer, t *metav1.Table) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: p.Wide, NoHeaders: p.NoHeaders}).PrintObj(t, w)
}
