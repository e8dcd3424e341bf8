// Package redistest starts a throwaway redis-server on loopback for tests
// that need a real one.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	// CAFile is the PEM file of the CA that signed a TLS server's
	// certificate (StartTLS); empty for a plain server.
	CAFile  string
	dir     string
	cmd     *exec.Cmd
	tls     *tls.Config // how ping connects to a TLS server
	persist bool
	args    []string // more redis-server arguments (StartWith)
}

// Start runs redis-server on a free 127.0.0.1 port, without persistence,
// stopped when the test ends. Without redis-server the test is skipped,
// except under CI, which installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t)
	s.Restart(t)
	t.Cleanup(s.Stop)
	return s
}

// StartWith is Start with more redis-server arguments, such as
// "--maxmemory-policy", "volatile-lru".
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	s := newServer(t)
	s.args = args
	s.Restart(t)
	t.Cleanup(s.Stop)
	return s
}

// StartReplica starts a server that replicates primary, and returns once
// the replica confirms a write made on primary (WAIT 1 after it): a
// replica that has just synced is counted by a WAIT with nothing to wait
// for before it confirms anything, which it first does up to a second
// later.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	// A full sync waits 5s for other replicas to share it unless told not to.
	_, _ = primary.command("CONFIG SET repl-diskless-sync-delay 0")
	host, port, _ := net.SplitHostPort(primary.Addr)
	s := StartWith(t, "--replicaof", host, port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if line, err := primary.command("SET redistest:replica 1", "DEL redistest:replica", "WAIT 1 100"); err == nil && line == ":1\r\n" {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	t.Fatalf("replica %s of %s did not catch up: %s", s.Addr, primary.Addr, log)
	return nil
}

// StartPersistent is Start with every write appended to a file and flushed
// to disk before it is acknowledged (appendonly, appendfsync always): after
// Stop and Restart the server has every write it acknowledged.
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	s := newServer(t)
	s.persist = true
	s.Restart(t)
	t.Cleanup(s.Stop)
	return s
}

func newServer(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed; .ci/run installs it")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &Server{Addr: addr, dir: t.TempDir()}
}

// Restart starts the server again on the same port and folder (after Stop).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{"--port", port}
	if s.tls != nil {
		args = []string{"--port", "0", "--tls-port", port, "--tls-auth-clients", "no",
			"--tls-cert-file", filepath.Join(s.dir, "server.pem"), "--tls-key-file", filepath.Join(s.dir, "server.key")}
	}
	aof := []string{"--appendonly", "no"}
	if s.persist {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	s.cmd = exec.Command("redis-server", append(append(args, "--bind", "127.0.0.1",
		"--save", "", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")), append(aof, s.args...)...)...)
	// A group of its own, so that Stop ends the child a server forks to
	// rewrite its AOF too, which would otherwise write on in s.dir.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.ping() == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	t.Fatalf("redis-server on %s did not answer PING: %s", s.Addr, log)
}

// Stop kills the server at once, as a crash would, with any child it
// forked.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func (s *Server) ping() error {
	line, err := s.command("PING")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// command sends inline commands on a new connection and returns the first
// line of the answer to the last (each answer before it being one line).
func (s *Server) command(cmds ...string) (string, error) {
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.Addr, s.tls)
	} else {
		c, err = net.DialTimeout("tcp", s.Addr, time.Second)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, strings.Join(cmds, "\r\n")+"\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	var line string
	for range cmds {
		if line, err = r.ReadString('\n'); err != nil {
			return "", err
		}
	}
	return line, nil
}
