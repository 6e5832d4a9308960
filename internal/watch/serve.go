package watch

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Serving /metrics is HTTP/1.x's smallest exchange: one GET, one answer,
// the connection closed (Prometheus and curl scrape so). pgmedic answers it
// itself rather than through net/http, which every pgmedic process would
// otherwise initialise at start-up (its packages, and some 95 of the
// runtime's interface tables) for this one endpoint of one command: a
// fortieth of explain of a small plan.

const (
	// requestLimit bounds a request's line and headers together.
	requestLimit = 16 << 10
	// requestWait bounds how long a client may take to send them, and
	// to read the answer (a client that stalls holds nothing else up:
	// each connection has its own goroutine).
	requestWait = 5 * time.Second
)

// MetricsServer serves Metrics over HTTP on a listener until it is closed.
type MetricsServer struct {
	m     *Metrics
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Serve answers /metrics on ln in a goroutine of its own; Close stops it.
func (m *Metrics) Serve(ln net.Listener) *MetricsServer {
	s := &MetricsServer{m: m, ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *MetricsServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.conns == nil
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, or a connection reset before it
			// was accepted: the listener is still good.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.conns == nil { // closed meanwhile
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.answer(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// Close stops accepting, ends the exchanges in flight and waits for them.
func (s *MetricsServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// answer reads one request from c and writes its response.
func (s *MetricsServer) answer(c net.Conn) {
	c.SetDeadline(time.Now().Add(requestWait))
	method, path, ok := readRequest(bufio.NewReaderSize(&limited{c, requestLimit}, 4096))
	switch {
	case !ok:
		respond(c, "400 Bad Request", "text/plain; charset=utf-8", "a request line and headers of HTTP/1.x were expected\n", false)
	case path != "/metrics":
		respond(c, "404 Not Found", "text/plain; charset=utf-8", "pgmedic serves /metrics only\n", method == "HEAD")
	case method != "GET" && method != "HEAD":
		respond(c, "405 Method Not Allowed", "text/plain; charset=utf-8", "GET /metrics\n", false)
	default:
		var b bytes.Buffer
		s.m.Write(&b)
		respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", b.String(), method == "HEAD")
	}
}

// readRequest reads a request line and its headers (which /metrics does
// not need) up to the blank line. The path loses its query string.
func readRequest(r *bufio.Reader) (method, path string, ok bool) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", "", false
	}
	f := strings.Fields(line)
	if len(f) != 3 || !strings.HasPrefix(f[2], "HTTP/1.") {
		return "", "", false
	}
	method, path = f[0], f[1]
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		// The absolute form a proxy sends: its path is after the host.
		rest := path[strings.Index(path, "//")+2:]
		path = "/"
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			path = rest[i:]
		}
	}
	if !strings.HasPrefix(path, "/") {
		// Neither the origin form nor the absolute one ("*" is OPTIONS'):
		// not a request for a resource.
		return "", "", false
	}
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return "", "", false
		}
		if h == "\r\n" || h == "\n" {
			return method, path, true
		}
	}
}

func respond(c net.Conn, status, contentType, body string, head bool) {
	var b strings.Builder
	b.WriteString("HTTP/1.1 " + status + "\r\n")
	b.WriteString("Content-Type: " + contentType + "\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	b.WriteString("Connection: close\r\n\r\n")
	if !head {
		b.WriteString(body)
	}
	c.Write([]byte(b.String()))
}

// limited reads at most n bytes from a connection: a request larger than
// that is cut, and fails to parse.
type limited struct {
	c net.Conn
	n int
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("request too large")
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	k, err := l.c.Read(p)
	l.n -= k
	return k, err
}
