package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pprofDir is where -pprof puts the issuer's CPU profiles.
var pprofDir = flag.String("pprof", "", "serve the issuer's profiles (SNOWTOKEN_PPROF) and take a CPU profile of the issuer during the last round "+
	"of each DPoP validation row, of the private_key_jwt row, of the never-seen token exchange row and of the JWT issue row they are compared with into this directory (profiling costs the issuer CPU: not for the figures)")

// fileName is a row's name made a file name, for its pool and profile.
func fileName(row string) string {
	return strings.NewReplacer(" ", "-", "/", "", ",", "", "(", "", ")", "").Replace(row)
}

// issuerMetrics is the URL of the issuer's metrics listener, which serves
// its profiles; empty without -pprof.
var issuerMetrics string

// withProfiles is the issuer's environment env with its profiles served on
// a free loopback port, and that listener's URL, under -pprof; else env.
func withProfiles(env []string) ([]string, string) {
	if *pprofDir == "" {
		return env, ""
	}
	port, err := freePort()
	if err != nil {
		return env, ""
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := []string{"SNOWTOKEN_PPROF=true"}
	for _, e := range env {
		if strings.HasPrefix(e, "SNOWTOKEN_METRICS_ADDR=") {
			e = "SNOWTOKEN_METRICS_ADDR=" + addr
		}
		out = append(out, e)
	}
	return out, "http://" + addr
}

// startProfile takes a CPU profile of the issuer from a second into a run
// of d to a second before its end, into name.pprof under -pprof; the
// function it returns waits for it.
func startProfile(name string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		client := &http.Client{Timeout: d + 30*time.Second}
		resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", issuerMetrics, max(int(d.Seconds())-2, 1)))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("profile: %s: %s", resp.Status, b)
		}
		if err == nil {
			path := filepath.Join(*pprofDir, name+".pprof")
			if err = os.WriteFile(path, b, 0o600); err == nil {
				fmt.Printf("(CPU profile of the issuer: %s)\n", path)
			}
		}
		done <- err
	}()
	return func() error { return <-done }
}
