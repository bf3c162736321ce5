package clientauth

import (
	"fmt"
	"os"
	"strings"
	"unicode"
)

// WorkloadIdentity binds a client to a workload that an issuer the
// operator trusts vouches for: a Kubernetes service account (the cluster's
// service-account issuer, sub system:serviceaccount:NAMESPACE:NAME), or a
// workload of any OpenID issuer (a CI job, a cloud's workload identity).
// The workload sends the issuer's token for it, whose aud names this
// issuer, as client_assertion, with client_id.
//
// Its jti is not single-use, unlike a private_key_jwt assertion's: the
// workload does not make the token, it is handed one (kubelet writes a
// projected token to the pod and rotates it at 80% of its lifetime), and
// sends it with every request until then. What keeps a copied token from
// being worth much is its audience (this issuer only: no other service
// accepts it, and this one hands out tokens bound to the client's scopes)
// and its lifetime, which Options.MaxWorkloadLifetime caps (24 h unless
// set; a projected token's expirationSeconds is 1 h by default).
type WorkloadIdentity struct {
	// Issuer is the iss the token must have, such as
	// https://kubernetes.default.svc.cluster.local (kubectl get --raw
	// /.well-known/openid-configuration shows the cluster's).
	Issuer string `json:"issuer"`
	// Subject is the sub the token must have, such as
	// system:serviceaccount:shop:orders.
	Subject string `json:"subject"`
	// JWKSURI is where the issuer's keys are, such as
	// https://kubernetes.default.svc/openid/v1/jwks. Empty means the
	// jwks_uri of Issuer's discovery document.
	JWKSURI string `json:"jwks_uri,omitempty"`
	// CAFile, if set, is a PEM file of the CAs the key server's
	// certificate chains to, instead of the system's: in a pod,
	// /var/run/secrets/kubernetes.io/serviceaccount/ca.crt.
	CAFile string `json:"ca_file,omitempty"`
	// BearerTokenFile, if set, is a file whose token is sent to the key
	// server (read again at each fetch): in a pod, the issuer's own
	// service-account token, /var/run/secrets/kubernetes.io/serviceaccount/token.
	BearerTokenFile string `json:"bearer_token_file,omitempty"`
}

// maxSubjectLen bounds a workload's subject.
const maxSubjectLen = 512

// Check reports what is wrong with w, if anything: Issuer and JWKSURI
// must pass CheckURL, Subject be one line of printable text, and the files
// exist (the CA file holding a PEM certificate).
func (w *WorkloadIdentity) Check() error {
	if err := CheckURL(w.Issuer); err != nil {
		return fmt.Errorf("%w: issuer: %w", ErrRegistration, err)
	}
	if w.Subject == "" || len(w.Subject) > maxSubjectLen || strings.IndexFunc(w.Subject, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}) >= 0 {
		return fmt.Errorf("%w: subject: want one line of at most %d bytes", ErrRegistration, maxSubjectLen)
	}
	if w.JWKSURI != "" {
		if err := CheckURL(w.JWKSURI); err != nil {
			return fmt.Errorf("%w: jwks_uri: %w", ErrRegistration, err)
		}
	}
	if w.CAFile != "" {
		if _, err := loadCA(w.CAFile); err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
	}
	if w.BearerTokenFile != "" {
		if _, err := os.Stat(w.BearerTokenFile); err != nil {
			return fmt.Errorf("%w: bearer_token_file: %w", ErrRegistration, err)
		}
	}
	return nil
}

// source is where w's keys are fetched from.
func (w *WorkloadIdentity) source() Source {
	return Source{URL: w.JWKSURI, Issuer: w.Issuer, CAFile: w.CAFile, BearerTokenFile: w.BearerTokenFile}
}
