// Command rulesdoc writes docs/rules.md from the rule table of package lint
// (lint.RulesMarkdown): `go run ./hack/rulesdoc -o docs/rules.md`, run by
// `make docs` and by `go generate ./lint`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/karpx/karpx/lint"
)

func main() {
	out := flag.String("o", "docs/rules.md", "file to write")
	flag.Parse()
	md, err := lint.RulesMarkdown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rulesdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "rulesdoc:", err)
		os.Exit(1)
	}
}
