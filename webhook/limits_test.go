package webhook

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// counterValue reads c's current value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// limitedTestServer serves hook at /hook behind l.
func limitedTestServer(t *testing.T, l RequestLimits, hook http.Handler) *httptest.Server {
	t.Helper()
	inner := &captureServer{handlers: map[string]http.Handler{}}
	l.Server(inner).Register("/hook", hook)
	srv := httptest.NewServer(inner.handlers["/hook"])
	t.Cleanup(srv.Close)
	return srv
}

// A client that sends its headers and then trickles its body is cut off
// at the read deadline instead of holding the connection; the control, the
// same body sent at once, is answered.
func TestRequestLimitsCutASlowBody(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "read %d bytes", len(body))
	})
	srv := limitedTestServer(t, RequestLimits{ReadTimeout: 300 * time.Millisecond}, echo)

	// Control: the whole body at once.
	resp, err := http.Post(srv.URL+"/hook", "application/json", strings.NewReader(`{"kind":"AdmissionReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "read 26 bytes" {
		t.Fatalf("control: %s %q", resp.Status, got)
	}

	// Slow: 10 bytes of a promised 1,000, then nothing. The server must end
	// the exchange (an error answer or a closed connection) well before the
	// client would have finished.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":\"A")
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err == nil && !strings.Contains(line, "400") {
		t.Fatalf("slow body: got %q, want the request cut off (400 or closed)", line)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("slow body: the server kept the connection open for 10 s past a 300 ms read deadline")
	}
}

// One request past MaxInFlight is answered 429 at once and counted; once a
// slot frees, the next is served. The control is the two requests within
// the bound, which are served.
func TestRequestLimitsBoundInFlight(t *testing.T) {
	entered, release := make(chan struct{}, 2), make(chan struct{})
	block := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprint(w, "ok")
	})
	srv := limitedTestServer(t, RequestLimits{MaxInFlight: 2}, block)
	before := counterValue(t, rejectedRequests.WithLabelValues("overloaded"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func() (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hook", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	results := make(chan int, 2)
	for range 2 {
		go func() {
			code, err := get()
			if err != nil {
				t.Error(err)
			}
			results <- code
		}()
	}
	<-entered
	<-entered
	if code, err := get(); err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("third request while two are in flight: %d %v, want 429", code, err)
	}
	if got := counterValue(t, rejectedRequests.WithLabelValues("overloaded")) - before; got != 1 {
		t.Errorf("karpx_webhook_rejected_requests_total{reason=overloaded} rose by %v, want 1", got)
	}
	close(release)
	for range 2 {
		if code := <-results; code != http.StatusOK {
			t.Errorf("request within the bound: %d, want 200", code)
		}
	}
	if code, err := get(); err != nil || code != http.StatusOK {
		t.Fatalf("request after the slots freed: %d %v, want 200", code, err)
	}
}
