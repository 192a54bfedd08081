package problems

import (
	"fmt"
	"os"
	"testing"
)

// ScenarioLogEnv names the environment variable that `make test` sets to
// a file collecting every scenario's figures (_output/scenarios.log),
// printed after the run because go test hides the logs of passing tests.
const ScenarioLogEnv = "KARPX_SCENARIO_LOG"

// Logf logs one line of a scenario's figures on t and, when
// ScenarioLogEnv names a file, appends it there as "TEST: LINE". A file
// it cannot write is reported on t, not failed: the figures are also in
// t's log.
func Logf(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv(ScenarioLogEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("writing %s: %v", path, err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s: %s\n", t.Name(), line); err != nil {
		t.Logf("writing %s: %v", path, err)
	}
}
