package vendorhttp

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// ErrBaseInsecure is CheckPlainHTTP's answer for an http:// base URL to a
// host that is not loopback.
var ErrBaseInsecure = errors.New("uses http:// to a host that is not loopback (127.0.0.0/8, ::1, localhost): use https://, or allow plain http explicitly (allow_insecure_http)")

// CheckPlainHTTP refuses a base URL that would send credentials in the
// clear off the machine: scheme http and a host that is not loopback
// (127.0.0.0/8, ::1, "localhost"), unless allow is set. https, and http to
// loopback (local simulators, a sidecar proxy), always pass. The error is
// ErrBaseInsecure, without the URL: the caller names the field.
func CheckPlainHTTP(base *url.URL, allow bool) error {
	if allow || base.Scheme != "http" || Loopback(base.Hostname()) {
		return nil
	}
	return ErrBaseInsecure
}

// Loopback reports whether host (no port; IPv6 without brackets) is
// "localhost" or a loopback address. Other names are not resolved: a name
// that happens to resolve to 127.0.0.1 is not loopback here.
func Loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// NoRedirects returns a copy of c (a new client when c is nil) that never
// follows a redirect: a 3xx comes back as the answer. A redirected POST
// would lose its body or carry the credentials to another host. c itself
// is not changed.
func NoRedirects(c *http.Client) *http.Client {
	var client http.Client
	if c != nil {
		client = *c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}
