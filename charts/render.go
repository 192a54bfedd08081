package charts

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// Manifest is one rendered template: its path inside the chart (e.g.
// "templates/controller/deployment.yaml") and its YAML, which is empty
// when the values turn the template off.
type Manifest struct {
	Template string
	YAML     string
}

// Load reads the chart in dir (e.g. charts/karpx). It returns Helm's
// loader error, which names the file, when the chart does not parse.
func Load(dir string) (*chart.Chart, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	return c, nil
}

// Render renders c as `helm template --namespace namespace RELEASE` does
// with the user-supplied values (nil for the defaults): values are
// coalesced with the chart's values.yaml and checked against its
// values.schema.json, whose errors name the offending value. It returns
// the rendered templates (helpers and NOTES.txt left out) sorted by path.
func Render(c *chart.Chart, release, namespace string, values map[string]any) ([]Manifest, error) {
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(c, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s values: %w", c.Name(), err)
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", c.Name(), err)
	}
	manifests := make([]Manifest, 0, len(out))
	for name, text := range out {
		// Keys are "CHART/templates/...".
		_, tmpl, _ := strings.Cut(name, "/")
		base := path.Base(tmpl)
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		manifests = append(manifests, Manifest{Template: tmpl, YAML: strings.TrimSpace(text)})
	}
	sort.Slice(manifests, func(i, j int) bool { return manifests[i].Template < manifests[j].Template })
	return manifests, nil
}
