package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is a headless Chromium tab with the network off, recording
// what the page complains about.
type Browser struct {
	Ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// Errors are the console errors, uncaught exceptions, log entries of
// level error, and any request the page made for something that is not
// the file itself.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *Browser) record(s string) {
	b.mu.Lock()
	b.errors = append(b.errors, s)
	b.mu.Unlock()
}

// chromium finds Debian's chromium (or another Chromium-based browser).
func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on PATH (apt-get install chromium)")
}

// OpenOffline opens a local HTML file in headless Chromium with the
// network emulated offline, waits until the page marks its body
// data-ready, and returns the tab. It skips (fails under CI=true) when no
// Chromium is installed. The browser ends with the test.
func OpenOffline(t testing.TB, path string) *Browser {
	t.Helper()
	exe, err := chromium()
	if err != nil {
		Missing(t, "chromium", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("headless", "new"), chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("no-first-run", true), chromedp.Flag("disable-extensions", true),
		// chromium on a loaded machine can take longer than chromedp's 20 s
		// to say where its DevTools socket is.
		chromedp.WSURLReadTimeout(90*time.Second))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 150*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b := &Browser{Ctx: ctx}
	page := "file://" + abs
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.record("exception: " + msg)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.record("console." + string(e.Type) + ": " + strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError {
				b.record("log: " + e.Entry.Text + " " + e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; u != page && !strings.HasPrefix(u, "data:") {
				b.record("network request: " + u)
			}
		}
	})
	if err := chromedp.Run(ctx,
		network.Enable(), log.Enable(), runtime.Enable(),
		network.EmulateNetworkConditions(true, 0, -1, -1),
		browser.GrantPermissions([]browser.PermissionType{browser.PermissionTypeClipboardReadWrite, browser.PermissionTypeClipboardSanitizedWrite}),
		chromedp.Navigate(page),
		chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("opening %s in chromium: %v (errors so far: %v)", path, err, b.Errors())
	}
	return b
}

// Screenshot saves the whole page as a PNG under ArtifactsDir and returns
// its path.
func (b *Browser) Screenshot(t testing.TB, name string) string {
	t.Helper()
	var png []byte
	if err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := ArtifactsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// ArtifactsDir is where tests leave what a person may want to look at
// (screenshots): $PGMEDIC_ARTIFACTS, or pgmedic-artifacts in the temporary
// directory.
func ArtifactsDir() string {
	if d := os.Getenv("PGMEDIC_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "pgmedic-artifacts")
}

// Viewport is a PNG of what the browser's window shows (1280 by 900), the
// top of the page as a person opening it first sees it.
func (b *Browser) Viewport(t testing.TB) []byte {
	t.Helper()
	var png []byte
	if err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return png
}
