package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/token/syntax"
	"github.com/snowtoken/snowtoken/token/txn"
)

// DevTxnTrustDomain is the trust domain of dev mode's Transaction Tokens,
// so that the feature shows with nothing set (docs/txn-tokens.md).
const DevTxnTrustDomain = "dev.snowtoken.local"

// loadTxn reads SNOWTOKEN_TXN_TRUST_DOMAIN and SNOWTOKEN_TXN_TTL: the trust
// domain Transaction Tokens are minted for (unset: off in production,
// DevTxnTrustDomain in dev mode, which Load decides; off: off; else an
// audience's syntax), and their lifetime (unset: txn.DefaultTTL; else
// txn.MinTTL to txn.MaxTTL). set reports whether the domain was given.
func loadTxn(getenv func(string) string, bad func(name, value string, err error)) (domain string, set bool, ttl time.Duration) {
	ttl = txn.DefaultTTL
	switch v := getenv("SNOWTOKEN_TXN_TRUST_DOMAIN"); {
	case v == "":
	case strings.EqualFold(v, "off"):
		set = true
	case syntax.CheckAudience(v) != nil:
		bad("SNOWTOKEN_TXN_TRUST_DOMAIN", v, errors.New("want off, or 1 to 256 printable ASCII bytes, no space, quote or backslash, such as shop.internal"))
	default:
		domain, set = v, true
	}
	if v := getenv("SNOWTOKEN_TXN_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < txn.MinTTL || d > txn.MaxTTL {
			bad("SNOWTOKEN_TXN_TTL", v, fmt.Errorf("want a duration from %v to %v", txn.MinTTL, txn.MaxTTL))
		} else {
			ttl = d
		}
	}
	return domain, set, ttl
}
