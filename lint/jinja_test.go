package lint

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// jinjaPart is an AL2023 MIME document with one text/jinja2 part.
func jinjaPart(body string) string {
	return mimeDoc("J", "Content-Type: text/jinja2\n\n## template: jinja\n"+body)
}

// Templates cloud-init renders: each unsafe one is denied as a restart
// (KX003) or as uninspectable (KX009), whichever the rendering shows;
// each safe one is admitted.
func TestJinjaTemplates(t *testing.T) {
	for _, c := range []struct {
		name, family, text string
		want               string // "" admitted, else the rule that must deny
	}{
		// The template supplies the verb.
		{"literal verb", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - systemctl {{ 'stop' }} kubelet\n"), RuleUserDataNodeRestart},
		{"literal verb safe", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - systemctl {{ 'restart' }} chronyd\n"), ""},
		{"case filter", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - {{ 'REBOOT' | lower }}\n"), RuleUserDataNodeRestart},
		{"case filter safe", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - {{ 'HOSTNAME' | lower }}\n"), ""},
		// Branches are all rendered: the condition reads instance data.
		{"if branch", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n{% if v1.region == 'us-east-1' %}\n  - reboot\n{% endif %}\n"), RuleUserDataNodeRestart},
		{"else branch", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n{% if v1.cloud_name == 'aws' %}\n  - echo aws\n{% else %}\n  - poweroff\n{% endif %}\n"), RuleUserDataNodeRestart},
		{"elif branch", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n{% if v1.region == 'a' %}\n  - echo a\n{% elif v1.region == 'b' %}\n  - halt\n{% endif %}\n"), RuleUserDataNodeRestart},
		{"if branch safe", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n{% if v1.region == 'us-east-1' %}\n  - systemctl restart chronyd\n{% else %}\n  - echo other\n{% endif %}\n"), ""},
		{"word split across a branch", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\n{% if v1.region %}re{% else %}x{% endif %}boot\n"), RuleUserDataNodeRestart},
		{"word split across a branch safe", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\n{% if v1.region %}ho{% else %}x{% endif %}stname\n"), ""},
		// Instance data karpx cannot know.
		{"command from instance data", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - {{ v1.local_hostname }} now\n"), RuleUserDataUninspectable},
		{"argument from instance data", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - hostnamectl set-hostname {{ v1.local_hostname }}\n  - echo {{ ds.meta_data.instance_id }} > /etc/instance-id\n"), ""},
		{"shell command from instance data", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\n{{ ds.meta_data['instance-type'] }} -r now\n"), RuleUserDataUninspectable},
		{"shell argument from instance data", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\necho \"{{ v1.instance_id }}\" > /etc/instance\n"), ""},
		{"free-form tags", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - echo {{ ds.meta_data.tags.instance.Name }}\n"), RuleUserDataUninspectable},
		{"known constant", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - echo {{ v1.cloud_name }} {{ platform }}\n"), ""},
		// Constructs karpx does not render.
		{"for loop", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n{% for c in ['reb', 'oot'] %}\n  - echo {{ c }}\n{% endfor %}\n"), RuleUserDataUninspectable},
		{"set", apisv1.AMIFamilyAL2023, jinjaPart("{% set v = 'reboot' %}\n#cloud-config\nruncmd:\n  - echo hi\n"), RuleUserDataUninspectable},
		{"concatenation", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - {{ 'reb' ~ 'oot' }}\n"), RuleUserDataUninspectable},
		{"other filter", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\nruncmd:\n  - {{ 'rexboot' | replace('x', '') }}\n"), RuleUserDataUninspectable},
		{"comment", apisv1.AMIFamilyAL2023, jinjaPart("#cloud-config\n{# reboot #}\nruncmd:\n  - echo hi\n"), ""},
		// Bounds.
		{"renderings", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\n" + strings.Repeat("{% if v1.region %}echo a{% else %}echo b{% endif %}\n", 6)), RuleUserDataUninspectable},
		{"bracket nesting", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\necho {{ " + strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40) + " }}\n"), RuleUserDataUninspectable},
		{"if nesting", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\n" + strings.Repeat("{% if v1.region %}", 40) + "echo" + strings.Repeat("{% endif %}", 40) + "\n"), RuleUserDataUninspectable},
		{"unclosed tag", apisv1.AMIFamilyAL2023, jinjaPart("#!/bin/bash\necho {{ v1.region\n"), RuleUserDataUninspectable},
		// The header outside MIME (Custom passes userData verbatim), and
		// a text/cloud-config part that carries it.
		{"custom top level", apisv1.AMIFamilyCustom, "## template: jinja\n#!/bin/bash\n{% if v1.region %}\nshutdown -r now\n{% endif %}\n", RuleUserDataNodeRestart},
		{"custom top level safe", apisv1.AMIFamilyCustom, "## template: jinja\n#!/bin/bash\n{% if v1.region %}\necho {{ v1.region }}\n{% endif %}\n", ""},
		{"cloud-config part", apisv1.AMIFamilyAL2023, mimeDoc("J", "Content-Type: text/cloud-config\n\n## template: jinja\n#cloud-config\nruncmd:\n{% if v1.region %}\n  - reboot\n{% endif %}\n"), RuleUserDataNodeRestart},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckUserData(c.family, c.text)
			if c.want == "" {
				if fs.Denied() {
					t.Fatalf("safe template denied: %v", fs)
				}
				return
			}
			if !hasRule(fs.Denials(), c.want) {
				t.Fatalf("want a %s denial, got %v", c.want, fs)
			}
		})
	}
}

// renderJinja renders with Jinja's trim_blocks (cloud-init's setting) and
// one rendering per branch.
func TestRenderJinja(t *testing.T) {
	got, err := renderJinja("a\n{% if v1.region %}\nb {{ v1.cloud_name }}\n{% else %}\nc {{ v1.region | upper }}\n{% endif %}\nd {# note #}{{ 'x' }}\n")
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = strings.TrimRight(got[i], "\n")
	}
	want := []string{"a\nb aws\nd x", "a\nc " + jinjaUnknown + "\nd x"}
	if !slices.Equal(got, want) {
		t.Fatalf("renderings %q, want %q", got, want)
	}
	// A Jinja error names the template's line.
	if _, err := renderJinja("ok\n\n{{ 1 + 1 }}\n"); err == nil || err.(*jinjaError).line != 3 {
		t.Fatalf("want an error at line 3, got %v", err)
	}
}

// FuzzRenderJinja renders random templates: renderJinja returns (no panic
// from the parser reaches the caller), within its bounds, and a template
// that renders is scanned without a panic either.
func FuzzRenderJinja(f *testing.F) {
	for _, s := range []string{
		"#cloud-config\nruncmd:\n{% if v1.region %}\n  - reboot\n{% endif %}\n",
		"#!/bin/bash\n{{ v1.local_hostname | upper }} {{ 'x' }}{# c #}\n",
		"{% for x in range(10) %}{{ x }}{% endfor %}",
		"{{ ((((1)))) }}{% if a %}{% elif b %}{% else %}{% endif %}",
		"{{ ds.meta_data['instance-id'] }}{{ ds.meta_data.tags.x }}{%- if x -%} y {%- endif -%}",
		"{% raw %}{{ x }}{% endraw %}{{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if len(body) > MaxUserDataBytes {
			body = body[:MaxUserDataBytes]
		}
		out, err := renderJinja(body)
		if err != nil {
			if je, ok := err.(*jinjaError); !ok || je.msg == "" || je.line < 1 {
				t.Fatalf("error %#v", err)
			}
			return
		}
		total := 0
		for _, w := range out {
			total += len(w)
		}
		if len(out) == 0 || len(out) > maxJinjaRenderings || total > maxJinjaBytes {
			t.Fatalf("%d renderings of %d bytes", len(out), total)
		}
		CheckUserData(apisv1.AMIFamilyAL2023, jinjaPart(body))
	})
}

// jinjaSplices are the routes by which a Jinja template hands cmd to the
// node: the property below adds them to the shell routes (splices), each
// in an {% if %} branch that instance data decides.
var jinjaSplices = []splice{
	{"jinja literal", func(_ *rand.Rand, c string) string { return "{{ '" + c + "' }}" }},
	{"jinja case filter", func(_ *rand.Rand, c string) string { return "{{ '" + strings.ToUpper(c) + "' | lower }}" }},
	{"jinja branch", func(_ *rand.Rand, c string) string {
		return "{% if v1.region == 'eu-west-1' %}\n" + c + "\n{% else %}\necho other\n{% endif %}"
	}},
	{"jinja split word", func(_ *rand.Rand, c string) string {
		return "{% if v1.availability_zone %}" + c[:1] + "{% else %}x{% endif %}" + c[1:]
	}},
	{"jinja instance data", func(_ *rand.Rand, c string) string { return "{{ ds.meta_data.instance_type }} " + c[1:] }},
}

// TestPropertyJinjaSpliceNeverAdmitted is TestPropertySplicedCommandNeverAdmitted
// for "## template: jinja" parts: a random safe script in a text/jinja2
// part with a forbidden command spliced in by a Jinja route, or by a
// shell route inside a branch that instance data decides, is denied
// (KX003) or refused (KX009), never admitted; the same template without
// the splice is admitted.
func TestPropertyJinjaSpliceNeverAdmitted(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2027))
	const rounds = 4
	routes := slices.Clone(jinjaSplices)
	for _, sp := range splices {
		routes = append(routes, splice{"jinja branch with " + sp.name, func(r *rand.Rand, c string) string {
			return "{% if v1.region == 'eu-west-1' %}\n" + sp.lines(r, c) + "\n{% endif %}"
		}})
	}
	for _, sp := range routes {
		for i := range rounds {
			safe := randomSafeScript(r)
			cmd := forbidden[r.IntN(len(forbidden))]
			at := r.IntN(len(safe) + 1)
			lines := append(append(append([]string{"#!/bin/bash"}, safe[:at]...), sp.lines(r, cmd)), safe[at:]...)
			fs := CheckUserData(apisv1.AMIFamilyAL2023, jinjaPart(strings.Join(lines, "\n")+"\n"))
			if !hasAnyRule(fs.Denials(), RuleUserDataNodeRestart, RuleUserDataUninspectable) {
				t.Errorf("%s #%d: %q spliced in was admitted: %v\n%s", sp.name, i, cmd, fs, strings.Join(lines, "\n"))
			}
			if i == 0 {
				twin := jinjaPart("#!/bin/bash\n" + strings.Join(safe, "\n") + "\n")
				if fs := CheckUserData(apisv1.AMIFamilyAL2023, twin); fs.Denied() {
					t.Errorf("%s: the safe template without the splice is denied: %v\n%s", sp.name, fs, twin)
				}
			}
		}
	}
}

// The renderings of one template share one time budget: 32 renderings
// each running the sandbox to its bound are refused, not inspected one
// after the other for 32 times the sandbox's bound.
func TestJinjaRenderingsBounded(t *testing.T) {
	body := "#!/bin/bash\n" + strings.Repeat("{% if v1.region %}echo a{% else %}echo b{% endif %}\n\n", 5) + "while :; do :; done\n"
	start := time.Now()
	fs := CheckUserData(apisv1.AMIFamilyAL2023, jinjaPart(body))
	t.Logf("%v: %v", time.Since(start).Round(time.Millisecond), fs)
	if !hasRule(fs.Denials(), RuleUserDataUninspectable) {
		t.Fatalf("want a KX009 denial, got %v", fs)
	}
}
