package lint

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestRuleExamples runs every rule's two documented examples: the first
// is flagged by the rule (denied for deny rules), the second has no
// finding of the rule and is admitted.
func TestRuleExamples(t *testing.T) {
	schema := exampleSchema(t)
	for _, r := range Rules() {
		t.Run(r.ID, func(t *testing.T) {
			fires, passes, err := RuleExamples(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			lintText := func(text string) []ObjectFinding {
				objs, skipped, err := DecodeObjects(strings.NewReader(text), r.ID)
				if err != nil || len(skipped) > 0 || len(objs) == 0 {
					t.Fatalf("example does not decode: %v %+v", err, skipped)
				}
				return LintObjects(context.Background(), objs, nil, schema)
			}
			got := lintText(fires)
			found := false
			for _, f := range got {
				if f.RuleID == r.ID {
					found = true
					if f.Severity != r.Severity {
						t.Errorf("flagged example: %s finding has severity %s, want %s", r.ID, f.Severity, r.Severity)
					}
				}
			}
			if !found {
				t.Errorf("flagged example: no %s finding; findings %v", r.ID, got)
			}
			if got := lintText(passes); len(got) != 0 {
				t.Errorf("admitted example has findings: %v", got)
			}
		})
	}
}

// TestRulesDocUpToDate fails when docs/rules.md is not what `make docs`
// would write.
func TestRulesDocUpToDate(t *testing.T) {
	want, err := RulesMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatalf("%v; run make docs", err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatal("docs/rules.md is stale: run make docs (or go generate ./lint)")
	}
}
