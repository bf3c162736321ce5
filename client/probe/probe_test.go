package probe

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string // in the error; "" for nil
	}{
		{"ok", http.StatusOK, "ok", ""},
		{"not ready", http.StatusServiceUnavailable, `{"status":"redis down"}` + "\n", `503 Service Unavailable: {"status":"redis down"}`},
		{"another 2xx", http.StatusNoContent, "", "204 No Content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			err := Get(t.Context(), srv.URL+"/healthz")
			if tc.want == "" {
				if err != nil {
					t.Errorf("Get = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Get = %v, want an error with %q", err, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	if err := Get(t.Context(), srv.URL); err == nil {
		t.Error("Get of a closed server = nil, want an error")
	}
}
