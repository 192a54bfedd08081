package webhook

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestPlanCertificates walks one Secret through the rotator's decisions at
// fixed instants: filled when empty, left alone while valid, the serving
// certificate alone renewed inside its lookahead, for a new DNS name or
// when another CA signed it, and CA and certificate renewed inside the
// CA's lookahead.
func TestPlanCertificates(t *testing.T) {
	names := []string{"karpx-webhook.karpx.svc", "karpx-webhook.karpx.svc.cluster.local"}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	apply := func(data, upd map[string][]byte) map[string][]byte {
		out := map[string][]byte{}
		for k, v := range data {
			out[k] = v
		}
		for k, v := range upd {
			out[k] = v
		}
		return out
	}
	plan := func(data map[string][]byte, names []string, at time.Time, wantWhy string, wantKeys ...string) map[string][]byte {
		t.Helper()
		upd, why, err := planCertificates(data, names, at)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(why, wantWhy) || (wantWhy == "") != (why == "") {
			t.Fatalf("at %s: reason %q, want %q", at, why, wantWhy)
		}
		var keys []string
		for _, k := range []string{SecretCAKey, SecretCAPrivateKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if upd[k] != nil {
				keys = append(keys, k)
			}
		}
		if strings.Join(keys, ",") != strings.Join(wantKeys, ",") {
			t.Fatalf("at %s (%s): writes %v, want %v", at, why, keys, wantKeys)
		}
		out := apply(data, upd)
		if why != "" && servingProblem(out, mustCA(t, out), names, at) != "" {
			t.Fatalf("the new pair is not valid: %s", servingProblem(out, mustCA(t, out), names, at))
		}
		return out
	}
	all := []string{SecretCAKey, SecretCAPrivateKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey}
	leaf := []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}

	first := plan(nil, names, t0, "no CA yet", all...)
	plan(first, names, t0, "")
	plan(first, names, t0.Add(ServerCertValidity-CertLookahead-time.Hour), "")

	renewed := plan(first, names, t0.Add(ServerCertValidity-CertLookahead+time.Hour), "serving certificate not valid", leaf...)
	if !bytes.Equal(renewed[SecretCAKey], first[SecretCAKey]) {
		t.Error("renewing the serving certificate changed the CA (caBundle)")
	}
	plan(first, append(names, "localhost"), t0, "not valid for localhost", leaf...)

	other := plan(nil, names, t0, "no CA yet", all...)
	foreign := apply(first, map[string][]byte{corev1.TLSCertKey: other[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: other[corev1.TLSPrivateKeyKey]})
	plan(foreign, names, t0, "serving certificate not valid", leaf...)

	mismatched := apply(first, map[string][]byte{SecretCAPrivateKey: other[SecretCAPrivateKey]})
	plan(mismatched, names, t0, "CA unreadable", all...)

	late := t0.Add(CACertValidity - CertLookahead + time.Hour)
	newCA := plan(renewed, names, late, "CA expires", all...)
	if bytes.Equal(newCA[SecretCAKey], first[SecretCAKey]) {
		t.Error("the CA was not replaced inside its lookahead")
	}
	// A serving certificate never outlives its CA.
	plan(newCA, names, late, "")
}

func mustCA(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data[SecretCAKey])
	if b == nil {
		t.Fatal("ca.crt is not PEM")
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
