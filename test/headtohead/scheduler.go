package headtohead

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scheduler counters: how often kube-scheduler tried the burst's pods and
// which cluster events sent them back to its queues. Both sides run the
// same kube-scheduler; a side whose Nodes change more while pods wait makes
// it retry them more, and each failed attempt lengthens a pod's backoff
// (1 s doubling to 10 s, kube-scheduler's --pod-initial-backoff-seconds
// and --pod-max-backoff-seconds defaults), which it may still be serving
// when its Node becomes schedulable.
const (
	// schedAttemptsPrefix keys scheduler_schedule_attempts_total by result
	// ("attempts scheduled", "attempts unschedulable", "attempts error").
	schedAttemptsPrefix = "attempts "
	// schedIncomingPrefix keys scheduler_queue_incoming_pods_total by
	// event and queue ("incoming NodeUpdate → backoff").
	schedIncomingPrefix = "incoming "
)

// schedulerMetricsTimeout bounds one read of kube-scheduler's /metrics.
const schedulerMetricsTimeout = 10 * time.Second

// SchedulerCounters returns kube-scheduler's counters from its /metrics at
// url (cluster.Cluster.SchedulerMetricsURL), keyed as parseSchedulerCounters
// says. kwokctl runs kube-scheduler with /metrics outside authorization
// and a self-signed serving certificate on loopback, so the request sends
// no credential and does not verify the certificate. It returns the
// request's or the parser's error, or one for a status other than 200.
func SchedulerCounters(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, schedulerMetricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402: loopback, self-signed, no credential sent
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading kube-scheduler's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading kube-scheduler's /metrics: %s", resp.Status)
	}
	return parseSchedulerCounters(resp.Body)
}

// parseSchedulerCounters reads Prometheus text from r and returns
// scheduler_schedule_attempts_total per result, keyed "attempts RESULT",
// and scheduler_queue_incoming_pods_total per event and queue, keyed
// "incoming EVENT → QUEUE", each summed over the other labels (profile).
// It returns the parser's error, or one when the attempts counter is
// missing.
func parseSchedulerCounters(r io.Reader) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing kube-scheduler's /metrics: %w", err)
	}
	if families["scheduler_schedule_attempts_total"] == nil {
		return nil, fmt.Errorf("kube-scheduler's /metrics has no scheduler_schedule_attempts_total")
	}
	out := map[string]float64{}
	for name, key := range map[string]func(map[string]string) string{
		"scheduler_schedule_attempts_total": func(l map[string]string) string { return schedAttemptsPrefix + l["result"] },
		"scheduler_queue_incoming_pods_total": func(l map[string]string) string {
			return schedIncomingPrefix + l["event"] + " → " + l["queue"]
		},
	} {
		sumCounter(families[name], out, key)
	}
	return out, nil
}

// addSchedulerCounters adds the burst's kube-scheduler figures from the
// counters before and after it: unschedulable attempts per pod (noting
// the scheduled and error attempts) and pods sent back to a queue per pod,
// noting the four events that sent the most.
func addSchedulerCounters(res *Results, before, after map[string]float64, pods float64) {
	diff := func(k string) float64 { return after[k] - before[k] }
	res.add("burst: kube-scheduler unschedulable attempts per pod", "", diff(schedAttemptsPrefix+"unschedulable")/pods,
		fmt.Sprintf("scheduled %.0f, error %.0f", diff(schedAttemptsPrefix+"scheduled"), diff(schedAttemptsPrefix+"error")))
	incoming := map[string]int{}
	total := 0
	for k := range after {
		if event, ok := strings.CutPrefix(k, schedIncomingPrefix); ok {
			if n := int(diff(k)); n > 0 {
				incoming[event] = n
				total += n
			}
		}
	}
	res.add("burst: kube-scheduler pods queued per pod, by event", "", float64(total)/pods, topRequests(incoming, 4))
}
