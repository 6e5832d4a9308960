package watch

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// /metrics as Prometheus and curl fetch it, through Go's own HTTP client,
// and what the server says to every other request.
func TestServeMetrics(t *testing.T) {
	m := NewMetrics()
	m.Register(Target{Name: "main"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := m.Serve(ln)
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/metrics", 200, `pgmedic_up{target="main"}`},
		{"GET", "/metrics?name[]=pgmedic_up", 200, `pgmedic_up{target="main"}`},
		{"HEAD", "/metrics", 200, ""},
		{"GET", "/", 404, "/metrics only"},
		{"POST", "/metrics", 405, "GET /metrics"},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(""))
		req.Header.Set("Accept-Encoding", "gzip") // Prometheus asks; plain text is an answer
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, resp.StatusCode, b, c.status, c.body)
		}
		if c.status == 200 && resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q", c.method, c.path, resp.Header.Get("Content-Type"))
		}
		if c.method == "HEAD" && len(b) != 0 {
			t.Errorf("HEAD answered with a body: %q", b)
		}
	}
	raw := func(req string) string {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		go io.WriteString(conn, req) // an oversized request is not read whole
		b, _ := io.ReadAll(conn)
		return string(b)
	}
	for _, c := range []struct{ name, req, want string }{
		{"not HTTP", "hello\r\n\r\n", "HTTP/1.1 400 "},
		{"headers past the limit", "GET /metrics HTTP/1.1\r\nX: " + strings.Repeat("a", requestLimit) + "\r\n\r\n", "HTTP/1.1 400 "},
		{"HTTP/1.0", "GET /metrics HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK"},
	} {
		if got := raw(c.req); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: answered %q, want %q...", c.name, got, c.want)
		}
	}
	// A client that connects and says nothing does not hold up Close.
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited on an idle client")
	}
	if _, err := client.Get(base + "/metrics"); err == nil {
		t.Error("still serving after Close")
	}
}
