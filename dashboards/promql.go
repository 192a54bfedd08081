package dashboards

import (
	"fmt"
	"slices"
	"strings"
)

// promqlKeywords are PromQL's reserved words that look like metric names:
// binary set operators, vector matching and aggregation modifiers,
// offset, bool, and the special values.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// labelListKeywords are followed by a parenthesised list of label names,
// not an expression.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the sorted, distinct metric names expr selects: the
// identifiers that are neither functions nor aggregations (followed by
// "("), keywords, label names (inside {...} or after by, without, on,
// ignoring, group_left, group_right), durations (inside [...] or after
// offset), numbers, strings or Grafana variables ($name, ${name}); and the
// value of a {__name__="..."} matcher. It is a tokenizer, not a parser:
// it returns an error only for unbalanced brackets, an unterminated
// string, or a {__name__=~...} regular expression it cannot resolve to
// names.
func MetricNames(expr string) ([]string, error) {
	var names []string
	var stack []byte
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '{':
			end, name, err := matchers(expr, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				names = append(names, name)
			}
			i = end
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("expr %q: '[' at %d is never closed", expr, i)
			}
			i += end + 1
		case c == '(':
			stack = append(stack, ')')
			i++
		case c == ')' || c == '}' || c == ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return nil, fmt.Errorf("expr %q: unbalanced %q at %d", expr, c, i)
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '$':
			i = skipVariable(expr, i)
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			for i < len(expr) && (isIdentChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdentChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := nextNonSpace(expr, i)
			switch {
			case labelListKeywords[strings.ToLower(word)] && next < len(expr) && expr[next] == '(':
				end := strings.IndexByte(expr[next:], ')')
				if end < 0 {
					return nil, fmt.Errorf("expr %q: label list after %s is never closed", expr, word)
				}
				i = next + end + 1
			case promqlKeywords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(':
				// A function or an aggregation.
			case aggregationModifier(expr, next):
				// An aggregation with its modifier first: sum by (le) (...).
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("expr %q: %d '(' never closed", expr, len(stack))
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// matchers skips the label matchers that start at expr[i] ('{') and
// returns the index after the closing '}' and the metric name of a
// __name__="..." matcher, if any.
func matchers(expr string, i int) (end int, name string, err error) {
	j := i + 1
	for j < len(expr) {
		switch c := expr[j]; {
		case c == '}':
			return j + 1, name, nil
		case c == '"' || c == '\'' || c == '`':
			e, err := skipString(expr, j)
			if err != nil {
				return 0, "", err
			}
			j = e
		case isIdentStart(c):
			start := j
			for j < len(expr) && isIdentChar(expr[j]) {
				j++
			}
			if expr[start:j] != "__name__" {
				continue
			}
			k := nextNonSpace(expr, j)
			op := ""
			for k < len(expr) && strings.IndexByte("=!~", expr[k]) >= 0 {
				op += string(expr[k])
				k++
			}
			k = nextNonSpace(expr, k)
			if op != "=" || k >= len(expr) {
				return 0, "", fmt.Errorf("expr %q: __name__%s matcher: only __name__=\"name\" can be checked", expr, op)
			}
			e, err := skipString(expr, k)
			if err != nil {
				return 0, "", err
			}
			name = expr[k+1 : e-1]
			j = e
		default:
			j++
		}
	}
	return 0, "", fmt.Errorf("expr %q: '{' at %d is never closed", expr, i)
}

// skipString returns the index after the string literal that starts at
// expr[i] (quote ", ' or `; backslash escapes in the first two).
func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("expr %q: string at %d is never closed", expr, i)
}

// skipVariable returns the index after the Grafana variable at expr[i]
// ($name, ${name} or ${name:format}).
func skipVariable(expr string, i int) int {
	i++
	if i < len(expr) && expr[i] == '{' {
		if end := strings.IndexByte(expr[i:], '}'); end >= 0 {
			return i + end + 1
		}
		return len(expr)
	}
	for i < len(expr) && isIdentChar(expr[i]) {
		i++
	}
	return i
}

// aggregationModifier reports whether the word at expr[i] is by or
// without followed by '('.
func aggregationModifier(expr string, i int) bool {
	j := i
	for j < len(expr) && isIdentChar(expr[j]) {
		j++
	}
	w := strings.ToLower(expr[i:j])
	k := nextNonSpace(expr, j)
	return (w == "by" || w == "without") && k < len(expr) && expr[k] == '('
}

func nextNonSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
