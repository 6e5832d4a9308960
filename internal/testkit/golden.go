package testkit

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata with what the tests produce")

// Golden compares got with the file at path (under the package's
// testdata) and, with -update, writes got there first. A difference fails
// the test and shows what was produced.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (accept with go test -update):\n%s", path, got)
	}
}

// Picture is a golden file that is an image taken from a real page (the
// README's picture of a report): with -update, png is written to path;
// without, the committed file must still be a PNG of the same size, since
// two renderings of a page with times in it never match byte for byte.
func Picture(t testing.TB, path string, png []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := pngSize(png)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (take it with go test -update)", err)
	}
	want, err := pngSize(b)
	if err != nil || want != got {
		t.Errorf("%s is not a PNG of the page's size %v (%v, %v): take it again with go test -update", path, got, want, err)
	}
}

func pngSize(b []byte) ([2]int, error) {
	c, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return [2]int{}, err
	}
	return [2]int{c.Width, c.Height}, nil
}
