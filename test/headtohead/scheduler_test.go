package headtohead

import (
	"strings"
	"testing"
)

// schedulerMetricsSample is kube-scheduler v1.35's exposition of the two
// counters, as its /metrics writes them (trimmed to a few series).
const schedulerMetricsSample = `# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 1
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 500
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1200
# HELP scheduler_queue_incoming_pods_total [STABLE] Number of pods added to scheduling queues by event and queue type.
# TYPE scheduler_queue_incoming_pods_total counter
scheduler_queue_incoming_pods_total{event="NodeAdd",queue="active"} 30
scheduler_queue_incoming_pods_total{event="NodeUpdate",queue="backoff"} 700
scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 500
scheduler_queue_incoming_pods_total{event="ScheduleAttemptFailure",queue="unschedulable"} 1200
`

func TestSchedulerCounters(t *testing.T) {
	before, err := parseSchedulerCounters(strings.NewReader(schedulerMetricsSample))
	if err != nil {
		t.Fatal(err)
	}
	if got := before["attempts unschedulable"]; got != 1200 {
		t.Errorf("attempts unschedulable %v, want 1200", got)
	}
	if got := before["incoming NodeUpdate → backoff"]; got != 700 {
		t.Errorf("incoming NodeUpdate → backoff %v, want 700", got)
	}
	after := map[string]float64{}
	for k, v := range before {
		after[k] = v
	}
	after["attempts unschedulable"] += 300
	after["attempts scheduled"] += 100
	after["incoming NodeUpdate → backoff"] += 250
	after["incoming PodAdd → active"] += 100
	after["incoming AssignedPodDelete → active"] = 50 // new since before
	res := &Results{}
	addSchedulerCounters(res, before, after, 100)
	checkFigure(t, res, "burst: kube-scheduler unschedulable attempts per pod", 3)
	checkFigure(t, res, "burst: kube-scheduler pods queued per pod, by event", 4)
	f, _ := res.find("burst: kube-scheduler pods queued per pod, by event")
	if want := "NodeUpdate → backoff 250, PodAdd → active 100, AssignedPodDelete → active 50"; f.Note != want {
		t.Errorf("note %q, want %q", f.Note, want)
	}
	f, _ = res.find("burst: kube-scheduler unschedulable attempts per pod")
	if want := "scheduled 100, error 0"; f.Note != want {
		t.Errorf("note %q, want %q", f.Note, want)
	}
	if _, err := parseSchedulerCounters(strings.NewReader("# TYPE other counter\nother 1\n")); err == nil {
		t.Error("no error for /metrics without scheduler_schedule_attempts_total")
	}
}
