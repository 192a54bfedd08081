package headtohead

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

// PriceUSDPerHour returns what a node of instanceType in zone costs per
// hour with capacity type capacity ("on-demand" or "spot"): the catalogue's
// on-demand price, or ec2sim's spot price for the zone, the prices both
// sides are given (ec2sim serves them to karpx; the generated
// instance-types file gives them to Karpenter). ok is false for a type or
// zone without a price.
func PriceUSDPerHour(instanceType, capacity, zone string) (price float64, ok bool) {
	if capacity == karpv1.CapacityTypeSpot {
		return ec2sim.SpotPrice(instanceType, zone)
	}
	it, found := catalog.Get(instanceType)
	if !found || it.OnDemandPriceUSDPerHour == nil {
		return 0, false
	}
	return *it.OnDemandPriceUSDPerHour, true
}

// nodesPrice returns the summed $/h of nodes and the names of instance
// types without a price (counted as 0).
func nodesPrice(nodes []nodeRecord) (total float64, unpriced []string) {
	for _, n := range nodes {
		p, ok := PriceUSDPerHour(n.instanceType, n.capacity, n.zone)
		if !ok {
			unpriced = append(unpriced, n.instanceType)
		}
		total += p
	}
	return total, unpriced
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// samples (seconds), NaN for none.
func percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(samples))
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// ProcCPUSeconds returns the user plus system CPU time, in seconds, the
// process pid has used (fields 14 and 15 of /proc/PID/stat). It returns
// an error when the process is gone.
func ProcCPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields start after ")".
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(fields))
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}

// ProcStatusMiB returns a memory field of /proc/PID/status ("VmRSS", the
// resident set now; "VmHWM", its peak) in MiB.
func ProcStatusMiB(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
		}
		return kib / 1024, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// APIServerRequests returns the API server's apiserver_request_total
// summed by "verb resource" (resource with "/subresource" when there is
// one), read from its /metrics with cfg (the admin's). The counter has no
// user or user-agent label (Kubernetes 1.35): it counts every client;
// ControllerRequests splits by user from the audit log.
func APIServerRequests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").SetHeader("Accept", "text/plain").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := map[string]float64{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return nil, fmt.Errorf("the API server's /metrics has no apiserver_request_total")
	}
	sumCounter(fam, out, func(labels map[string]string) string {
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		return key
	})
	return out, nil
}

// sumCounter adds each series of the counter family fam to out under the
// key that key makes of the series' labels (name → value), so series that
// differ only in labels the key leaves out are summed. A nil fam adds
// nothing.
func sumCounter(fam *dto.MetricFamily, out map[string]float64, key func(labels map[string]string) string) {
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[key(labels)] += m.GetCounter().GetValue()
	}
}

// sumRequests returns after minus before, summed over every key.
func sumRequests(before, after map[string]float64) float64 {
	total := 0.0
	for k, v := range after {
		total += v - before[k]
	}
	return total
}

// EC2Calls is what a side's ec2sim answered between two Stats snapshots.
type EC2Calls struct {
	// ByAction is the number of requests per action (every answer).
	ByAction map[string]int
	// Total is the number of requests of every action.
	Total int
	// Throttled is the number of throttled answers (RequestLimitExceeded,
	// ThrottlingException) of every action.
	Throttled int
	// ThrottledByAction is Throttled per action (actions with some only).
	ThrottledByAction map[string]int
}

// ec2Calls returns after minus before, per action and in total.
func ec2Calls(before, after map[string]ec2sim.ActionStats) EC2Calls {
	c := EC2Calls{ByAction: map[string]int{}, ThrottledByAction: map[string]int{}}
	for a, st := range after {
		n := int(st.Requests - before[a].Requests)
		if n > 0 {
			c.ByAction[a] = n
			c.Total += n
		}
		if t := int(st.Throttled - before[a].Throttled); t > 0 {
			c.ThrottledByAction[a] = t
			c.Throttled += t
		}
	}
	return c
}

// auditLine is the part of an audit.k8s.io/v1 Event ControllerRequests
// reads.
type auditLine struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// Request is one API request of a controller, from the audit log.
type Request struct {
	// At is when the API server received it.
	At time.Time
	// Verb is the request's verb ("get", "list", "watch", "create",
	// "update", "patch", "delete").
	Verb string
	// Resource is the resource, with "/subresource" when there is one;
	// "" for non-resource requests (discovery).
	Resource string
	// UserAgent is the client's User-Agent.
	UserAgent string
}

// ControllerRequests reads kube-apiserver's audit log (JSON lines; see
// cluster.AuditPolicy) and returns every request of user, once each (a
// watch when its response starts, every other request when it completes).
func ControllerRequests(auditLog, user string) ([]Request, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditLine
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", auditLog, err)
		}
		done := ev.Stage == "ResponseComplete" || ev.Stage == "Panic"
		if ev.Verb == "watch" {
			done = ev.Stage == "ResponseStarted"
		}
		if !done || ev.User.Username != user {
			continue
		}
		r := Request{At: ev.Received, Verb: ev.Verb, UserAgent: ev.UserAgent}
		if ev.ObjectRef != nil {
			r.Resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				r.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// countRequests returns the requests received in [from, to) by "verb
// resource", and their total.
func countRequests(reqs []Request, from, to time.Time) (byKey map[string]int, total int) {
	byKey = map[string]int{}
	for _, r := range reqs {
		if r.At.Before(from) || !r.At.Before(to) {
			continue
		}
		byKey[r.Verb+" "+r.Resource]++
		total++
	}
	return byKey, total
}

// topRequests formats the n largest entries of byKey as "verb resource
// N, …".
func topRequests(byKey map[string]int, n int) string {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if byKey[a] != byKey[b] {
			return byKey[b] - byKey[a]
		}
		return strings.Compare(a, b)
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, byKey[k])
	}
	return strings.Join(parts, ", ")
}
