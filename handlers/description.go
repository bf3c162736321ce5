package handlers

import (
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// description is what err tells a client of itself: the description it
// carries (refusal.Description: the errors our packages make for clients
// say what was wrong as data, not in their Go text), else what was wrong
// with a DPoP proof (dpop.Reason), else "": then fail tells the row's
// fallback text. It never reads err.Error(), whose chain (a library's
// words, a package's name, a value from a store) goes to the log only.
func description(err error) string {
	if d, ok := refusal.Description(err); ok {
		return d
	}
	if r, ok := dpop.Reason(err); ok {
		return r
	}
	return ""
}
