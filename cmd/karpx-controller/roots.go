package main

// The release images have no operating system underneath the binary (see
// hack/images), so there is no /etc/ssl for crypto/x509 to read: this
// import compiles Mozilla's root CA bundle into the binary and registers it
// as the fallback, used only when the system has no roots of its own. TLS
// to AWS's endpoints and to the API server's external issuers works from
// the empty image.
import _ "golang.org/x/crypto/x509roots/fallback"
