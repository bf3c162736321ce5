package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// The ext_authz rows: Envoy's Check over gRPC (SNOWTOKEN_EXTAUTHZ_ADDR)
// with one token, again and again (hot), against the bare grpc-go
// Authorization server (cmd/bare -extauthz) in the same round, with a load
// loop of its own: -c calls in flight at once over checkConns connections,
// as a few Envoys multiplex their checks, for -d each. Its floor is the bare
// server's CPU per check; the target is 1.3× that, and no Redis command for
// a hot token (hotCommands: the lease renewals and revocation-log
// heartbeats, amortised).

var (
	extAuthzRows = flag.Bool("extauthz", true, "also measure ext_authz Check over gRPC against a bare grpc-go server (extauthz.go)")
	extAuthzOnly = flag.Bool("extauthz-only", false, "measure the ext_authz Check rows alone, after the issuer starts")
)

// checkConns is how many gRPC connections carry the calls: a few Envoys.
const checkConns = 4

// checkTarget is the bound on a hot Check's server CPU ÷ the bare
// grpc-go server's.
const checkTarget = 1.3

// checkServer is one server the Check rows load.
type checkServer struct {
	name      string
	addr      string
	pid       int
	redisPort int // 0: Redis commands are not counted
}

// checkRun is one row's figures in one round.
type checkRun struct {
	calls, failed int64
	elapsed       time.Duration
	cpu           time.Duration // server CPU over the run
	cmds          float64       // Redis commands per call
	top           string        // those commands by name (commandCalls.perRequest)
}

func (r checkRun) cpuPerCall() time.Duration {
	if r.calls == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.calls)
}

// checkRows starts the bare grpc-go server on barePort, issues a token
// and runs checkTable against it and the issuer's listener on issuerPort.
func checkRows(dir, bareBin, issuerURL, basic string, barePort, issuerPort, issuerPid, redisPort int) error {
	bare, err := startAs(dir, "bare-extauthz", bareBin, nil, "-extauthz", "-addr", "127.0.0.1:"+strconv.Itoa(barePort))
	if err != nil {
		return err
	}
	defer bare.stop()
	hot, err := issue(issuerURL, basic)
	if err != nil {
		return err
	}
	return checkTable(
		checkServer{name: "bare grpc-go Authorization, fixed OK", addr: "127.0.0.1:" + strconv.Itoa(barePort), pid: bare.cmd.Process.Pid},
		checkServer{name: "ext_authz Check, hot (same JWT)", addr: "127.0.0.1:" + strconv.Itoa(issuerPort), pid: issuerPid, redisPort: redisPort},
		hot)
}

// checkTable runs -rounds rounds of the bare server then the issuer's
// Check with token, and prints each row's median round.
func checkTable(bare, issuer checkServer, token string) error {
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: "GET", Scheme: "https", Host: "api.example.com", Path: "/orders", Protocol: "HTTP/1.1",
		Headers: map[string]string{":method": "GET", ":path": "/orders", ":authority": "api.example.com", "authorization": "Bearer " + token,
			"user-agent": "curl/8.5.0", "accept": "*/*", "x-request-id": "0b2c5f0e-6a43-4f5e-9a59-3c2a6f1e8d71"},
	}}}}
	servers := []checkServer{bare, issuer}
	runs := make([][]checkRun, len(servers))
	for range *rounds {
		for i, s := range servers {
			r, err := loadCheck(s, req, *connections, *duration)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			runs[i] = append(runs[i], r)
		}
	}
	fmt.Printf("\next_authz Check over gRPC: %d calls in flight on %d connections, %s a run, median of %d rounds (by server CPU/check)\n\n",
		*connections, checkConns, *duration, *rounds)
	fmt.Println("| server | checks/s | failed | server CPU/check | ÷ bare grpc-go (target) | Redis cmds/check |")
	fmt.Println("|---|---|---|---|---|---|")
	floor := medianCheck(runs[0]).cpuPerCall()
	for i, s := range servers {
		m := medianCheck(runs[i])
		cmds := "—"
		if s.redisPort != 0 {
			cmds = fmt.Sprintf("%.4f (≤%g)", m.cmds, hotCommands)
		}
		ratio := "1.00×"
		if i > 0 {
			ratio = vsFloor(m.cpuPerCall(), floor, checkTarget)
		}
		fmt.Printf("| %s | %.0f | %d | %s | %s | %s |\n", s.name, float64(m.calls)/m.elapsed.Seconds(), m.failed, us(m.cpuPerCall()), ratio, cmds)
		if m.top != "" {
			defer fmt.Printf("\n- %s: %s\n", s.name, m.top)
		}
	}
	return nil
}

// medianCheck is the run of median server CPU per call.
func medianCheck(rs []checkRun) checkRun {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b checkRun) int { return int(a.cpuPerCall() - b.cpuPerCall()) })
	return s[len(s)/2]
}

// loadCheck keeps c calls of req in flight at s for d, and measures the
// server's CPU and, if s.redisPort is set, the Redis commands over the run.
// A call that fails, or answers anything but OK, is counted as failed.
func loadCheck(s checkServer, req *authv3.CheckRequest, c int, d time.Duration) (checkRun, error) {
	clients := make([]authv3.AuthorizationClient, checkConns)
	for i := range clients {
		conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return checkRun{}, err
		}
		defer conn.Close()
		clients[i] = authv3.NewAuthorizationClient(conn)
		// Warm the connection, waiting for a server just started: its dial
		// is not the server's work per check.
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = clients[i].Check(wctx, req, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return checkRun{}, err
		}
	}
	var cmds *commandsWindow
	if s.redisPort != 0 {
		var err error
		if cmds, err = startCommands(s.redisPort); err != nil {
			return checkRun{}, err
		}
	}
	cpu0, err := cpuTime(s.pid)
	if err != nil {
		return checkRun{}, err
	}
	var calls, failed atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c {
		client := clients[i%checkConns]
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := client.Check(context.Background(), req)
				calls.Add(1)
				if err != nil || codes.Code(resp.GetStatus().GetCode()) != codes.OK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := checkRun{calls: calls.Load(), failed: failed.Load(), elapsed: time.Since(start)}
	cpu1, err := cpuTime(s.pid)
	if err != nil {
		return checkRun{}, err
	}
	r.cpu = cpu1 - cpu0
	if cmds != nil {
		calls, err := cmds.end()
		if err != nil {
			return checkRun{}, err
		}
		r.cmds, r.top = calls.perRequest(r.calls)
	}
	return r, nil
}
