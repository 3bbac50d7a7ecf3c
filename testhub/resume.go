package main

// Restarting a hub on its own state (--resume), and pausing etcd behind the API server
// (SIGUSR1 pauses, SIGUSR2 resumes): the fault soak's hub restart and etcd pause
// (bench/soak/).

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// loadCredentials reads what generateCredentials wrote in dir.
func loadCredentials(dir string) (*hubFiles, error) {
	f := credentialFiles(dir)
	ca, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, err
	}
	f.CAData = ca
	tokens, err := os.ReadFile(f.Tokens)
	if err != nil {
		return nil, err
	}
	rows, err := csv.NewReader(bytes.NewReader(tokens)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", f.Tokens, err)
	}
	for _, row := range rows {
		if len(row) < 2 {
			continue
		}
		switch row[1] {
		case "admin":
			f.AdminToken = row[0]
		case "system:kube-controller-manager":
			f.KCMToken = row[0]
		}
	}
	if f.AdminToken == "" || f.KCMToken == "" {
		return nil, fmt.Errorf("%s: no admin or controller-manager token", f.Tokens)
	}
	return f, nil
}

// savedPort is the port the hub served on before (0: none), from <dir>/port.
func savedPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "port"))
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return p
}

func savePort(dir string, port int) error {
	return os.WriteFile(filepath.Join(dir, "port"), []byte(strconv.Itoa(port)+"\n"), 0o644)
}

// pausableProxy forwards TCP connections to target; while paused no byte moves in
// either direction (etcd frozen as the API server sees it).
type pausableProxy struct {
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

// startPausableProxy listens on a free loopback port; returns the proxy and its address.
func startPausableProxy(target string) (*pausableProxy, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	p := &pausableProxy{target: target}
	p.cond = sync.NewCond(&p.mu)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p, l.Addr().String(), nil
}

func (p *pausableProxy) setPaused(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *pausableProxy) waitRunning() {
	p.mu.Lock()
	for p.paused {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *pausableProxy) serve(c net.Conn) {
	p.waitRunning()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies from src to dst, holding each chunk while paused.
func (p *pausableProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitRunning()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pauseOnSignals pauses the proxy on SIGUSR1 and resumes it on SIGUSR2.
func (p *pausableProxy) pauseOnSignals() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range ch {
			paused := s == syscall.SIGUSR1
			p.setPaused(paused)
			if paused {
				logf("etcd paused (SIGUSR1; SIGUSR2 resumes)")
			} else {
				logf("etcd resumed")
			}
		}
	}()
}
