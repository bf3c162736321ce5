package clientauth

import (
	"fmt"
	"os"
	"strings"
	"unicode"
)

// TrustedIssuer is an issuer the operator trusts to sign JWTs, and where
// its keys are: the issuer of a client's workload identity
// (WorkloadIdentity), or one whose JWTs a client may exchange as subject
// tokens (a clients file's subject_token_issuers; VerifySubjectToken).
type TrustedIssuer struct {
	// Issuer is the iss the token must have, exactly, such as
	// https://kubernetes.default.svc.cluster.local (kubectl get --raw
	// /.well-known/openid-configuration shows the cluster's).
	Issuer string `json:"issuer"`
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
	TrustedIssuer
	// Subject is the sub the token must have, such as
	// system:serviceaccount:shop:orders.
	Subject string `json:"subject"`
}

// maxSubjectLen bounds a workload's subject, and a subject token's sub.
const maxSubjectLen = 512

// Check reports what is wrong with w, if anything: its issuer's (see
// TrustedIssuer.Check), and Subject must be one line of printable text.
func (w *WorkloadIdentity) Check() error {
	if err := w.TrustedIssuer.Check(); err != nil {
		return err
	}
	if !isSubject(w.Subject) {
		return fmt.Errorf("%w: subject: want one line of at most %d bytes", ErrRegistration, maxSubjectLen)
	}
	return nil
}

// isSubject reports whether s is a subject we accept from an issuer: 1 to
// maxSubjectLen bytes, no control or format character (one line, read as
// it is stored).
func isSubject(s string) bool {
	return s != "" && len(s) <= maxSubjectLen && strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}) < 0
}

// Check reports what is wrong with ti, if anything: Issuer and JWKSURI
// must pass CheckURL, and the files exist (the CA file holding a PEM
// certificate).
func (ti *TrustedIssuer) Check() error {
	if err := CheckURL(ti.Issuer); err != nil {
		return fmt.Errorf("%w: issuer: %w", ErrRegistration, err)
	}
	if ti.JWKSURI != "" {
		if err := CheckURL(ti.JWKSURI); err != nil {
			return fmt.Errorf("%w: jwks_uri: %w", ErrRegistration, err)
		}
	}
	if ti.CAFile != "" {
		if _, err := loadCA(ti.CAFile); err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
	}
	if ti.BearerTokenFile != "" {
		if _, err := os.Stat(ti.BearerTokenFile); err != nil {
			return fmt.Errorf("%w: bearer_token_file: %w", ErrRegistration, err)
		}
	}
	return nil
}

// source is where ti's keys are fetched from.
func (ti *TrustedIssuer) source() Source {
	return Source{URL: ti.JWKSURI, Issuer: ti.Issuer, CAFile: ti.CAFile, BearerTokenFile: ti.BearerTokenFile}
}
