package vendorhttp

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
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
// would lose its body or carry the credentials to another host. A client
// without a Transport of its own gets Transport(). c itself is not
// changed.
func NoRedirects(c *http.Client) *http.Client {
	var client http.Client
	if c != nil {
		client = *c
	}
	if client.Transport == nil {
		client.Transport = Transport()
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}

// IdleConnsPerHost is how many idle connections to one host Transport
// keeps for the next request. http.DefaultTransport keeps 2: a worker with
// 20 requests in flight to one vendor would close most connections as
// their answers came back and open a new one (a TCP and a TLS handshake)
// for most of its next requests. The idle connections are never more than
// the most requests once in flight to that host, so a high cap costs
// nothing where concurrency is low; an idle connection closes after
// http.DefaultTransport's IdleConnTimeout (90s).
const IdleConnsPerHost = 1024

// Transport is the transport of every vendor client without one of its
// own, shared by the process's speech and CRM clients: http.DefaultTransport's
// settings (proxy from the environment, dial and TLS timeouts, HTTP/2) with
// up to IdleConnsPerHost idle connections kept per host and no cap across
// hosts. When http.DefaultTransport is not an *http.Transport (a program
// replaced it), Transport is http.DefaultTransport as it is.
func Transport() http.RoundTripper { return sharedTransport() }

var sharedTransport = sync.OnceValue(func() http.RoundTripper {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t := base.Clone()
	t.MaxIdleConns = 0 // no cap across hosts: each host's is IdleConnsPerHost
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	return t
})
