// Command tinybin is the smallest binary with one module dependency: the
// images tests cross-build it for linux/amd64 and linux/arm64 and check that
// the SBOM lists exactly the modules its build info names.
package main

import (
	"fmt"

	"golang.org/x/sync/errgroup"
)

func main() {
	var g errgroup.Group
	g.Go(func() error { fmt.Println("tinybin"); return nil })
	_ = g.Wait()
}
