package webhook

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the certificate Secret besides corev1.TLSCertKey ("tls.crt") and
// corev1.TLSPrivateKeyKey ("tls.key"): the names
// github.com/open-policy-agent/cert-controller (karpx's rotator before
// this one) wrote, so that a Secret it filled keeps its CA.
const (
	// SecretCAKey holds the CA certificate (PEM), the caBundle.
	SecretCAKey = "ca.crt"
	// SecretCAPrivateKey holds the CA's private key (PEM).
	SecretCAPrivateKey = "ca.key"
)

// clockSkew is how far before now a new certificate's validity starts, so
// that a peer whose clock is behind accepts it.
const clockSkew = time.Hour

// planCertificates decides whether the Secret data needs a new pair at
// now, for a serving certificate valid for dnsNames: a new CA and serving
// certificate when the CA is missing, unparsable, not matching its key, or
// expiring within CertLookahead; a new serving certificate only when it is
// missing, not signed by the CA, not valid for every name, or expiring
// within CertLookahead. It returns the keys to write and why ("" and nil
// when the data is fine), or the error of key generation or signing.
func planCertificates(data map[string][]byte, dnsNames []string, now time.Time) (map[string][]byte, string, error) {
	ca, caKey, why := parseCA(data, now)
	out := map[string][]byte{}
	if why != "" {
		var err error
		ca, caKey, err = newCA(now)
		if err != nil {
			return nil, "", err
		}
		out[SecretCAKey] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
		if out[SecretCAPrivateKey], err = encodeKey(caKey); err != nil {
			return nil, "", err
		}
	} else if why = servingProblem(data, ca, dnsNames, now); why == "" {
		return nil, "", nil
	}
	cert, key, err := newServing(ca, caKey, dnsNames, now)
	if err != nil {
		return nil, "", err
	}
	out[corev1.TLSCertKey], out[corev1.TLSPrivateKeyKey] = cert, key
	return out, why, nil
}

// parseCA returns the Secret's CA and its signer, or why a new one is
// needed.
func parseCA(data map[string][]byte, now time.Time) (*x509.Certificate, crypto.Signer, string) {
	if len(data[SecretCAKey]) == 0 || len(data[SecretCAPrivateKey]) == 0 {
		return nil, nil, "no CA yet"
	}
	pair, err := tls.X509KeyPair(data[SecretCAKey], data[SecretCAPrivateKey])
	if err != nil {
		return nil, nil, "CA unreadable: " + err.Error()
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, "CA unreadable: " + err.Error()
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !ca.IsCA {
		return nil, nil, "CA certificate cannot sign"
	}
	if now.Add(CertLookahead).After(ca.NotAfter) {
		return nil, nil, fmt.Sprintf("CA expires %s, within %s", ca.NotAfter.UTC().Format(time.RFC3339), CertLookahead)
	}
	return ca, signer, ""
}

// servingProblem returns why the Secret's serving certificate must be
// replaced, or "" when it is valid for every name until after the
// lookahead, signed by ca and matches its key.
func servingProblem(data map[string][]byte, ca *x509.Certificate, dnsNames []string, now time.Time) string {
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return "serving certificate missing or unreadable: " + err.Error()
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "serving certificate unreadable: " + err.Error()
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	at := now.Add(CertLookahead)
	for _, n := range dnsNames {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: n, CurrentTime: at}); err != nil {
			return fmt.Sprintf("serving certificate not valid for %s at %s: %v", n, at.UTC().Format(time.RFC3339), err)
		}
	}
	return ""
}

// newCA returns a self-signed CA valid from now-clockSkew for
// CACertValidity, with a new ECDSA P-256 key.
func newCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "karpx-webhook-ca", Organization: []string{"karpx"}},
		NotBefore: now.Add(-clockSkew), NotAfter: now.Add(CACertValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// newServing returns a serving certificate for dnsNames (the first is the
// subject's common name) signed by ca, valid from now-clockSkew for
// ServerCertValidity but never past the CA, and its new ECDSA P-256 key,
// both PEM.
func newServing(ca *x509.Certificate, caKey crypto.Signer, dnsNames []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(ServerCertValidity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: dnsNames[0], Organization: []string{"karpx"}},
		DNSNames:  slices.Clone(dnsNames),
		NotBefore: now.Add(-clockSkew), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the webhook serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, err
}

// encodeKey returns key as PKCS #8 PEM.
func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// serial returns a random 128-bit certificate serial number (RFC 5280
// §4.1.2.2 allows up to 20 octets).
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}
