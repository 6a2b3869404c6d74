package docs_test

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, seen from this package's folder.
const root = ".."

var (
	// [text](target) and [text](target "title"); images too.
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// [name]: target
	refLink = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	// <scheme:...>
	autoLink = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9+.-]*:[^<>\s]+)>`)
	// Any http(s) URL anywhere, code included; group 1 is the host[:port].
	anyURL = regexp.MustCompile("https?://([^/\\s`'\"()<>\\]]*)")
	// Any path going up, anywhere, code included.
	upPath = regexp.MustCompile("(?:^|[\\s(`'\"\\[])(\\.\\./[^\\s)`'\"<>\\]]*)")
	// A Markdown heading.
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	// Fenced code blocks, where a heading is not a heading.
	fence = regexp.MustCompile("(?ms)^```.*?^```")
)

// markdownFiles returns every Markdown file of the repository, relative to
// root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not %s: %v", root, err)
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", "docs/README.md", "docs/design.md", "docs/stt-http-v1.md", "docs/crm-webhook-v1.md", "docs/json.md"} {
		found := false
		for _, f := range files {
			found = found || filepath.ToSlash(f) == want
		}
		if !found {
			t.Errorf("%s is missing", want)
		}
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loopback reports whether host (with an optional port) is this machine:
// examples may point there, nothing else may be linked.
func loopback(host string) bool {
	h := host
	if u, err := url.Parse("http://" + host); err == nil {
		h = u.Hostname()
	}
	switch h {
	case "127.0.0.1", "localhost", "::1", "[::1]":
		return true
	}
	return false
}

// inside reports whether target, relative to the folder of file (both
// relative to root), stays inside the repository.
func inside(file, target string) (string, bool) {
	p := filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(target)))
	return p, p != ".." && !strings.HasPrefix(p, ".."+string(filepath.Separator)) && !filepath.IsAbs(p)
}

// anchors returns the GitHub anchors of a Markdown text's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		}
		seen[a]++
		out[a] = true
	}
	return out
}

// TestLinksStayInTheRepository: a clone of the repository must be
// complete, so its Markdown links only to files it holds (which must
// exist, down to the heading), and mentions no path above its root and no
// URL but loopback examples.
func TestLinksStayInTheRepository(t *testing.T) {
	t.Parallel()
	for _, file := range markdownFiles(t) {
		text := read(t, file)
		var targets []string
		for _, re := range []*regexp.Regexp{inlineLink, refLink, autoLink} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				targets = append(targets, m[1])
			}
		}
		for _, target := range targets {
			u, err := url.Parse(target)
			switch {
			case err != nil:
				t.Errorf("%s: link %q does not parse: %v", file, target, err)
				continue
			case u.Scheme == "http" || u.Scheme == "https":
				if !loopback(u.Host) {
					t.Errorf("%s: link %q leaves the repository", file, target)
				}
				continue
			case u.Scheme != "" || u.Host != "":
				t.Errorf("%s: link %q leaves the repository", file, target)
				continue
			}
			dest, frag := file, u.Fragment
			if u.Path != "" {
				p, ok := inside(file, u.Path)
				if !ok {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", file, target, filepath.ToSlash(p))
					continue
				}
				dest = p
			}
			if frag != "" && strings.EqualFold(filepath.Ext(dest), ".md") && !anchors(read(t, dest))[frag] {
				t.Errorf("%s: link %q: %s has no heading #%s", file, target, filepath.ToSlash(dest), frag)
			}
		}
		for _, m := range anyURL.FindAllStringSubmatch(text, -1) {
			if m[1] != "" && !loopback(m[1]) {
				t.Errorf("%s: mentions %q, outside the repository", file, m[0])
			}
		}
		for _, m := range upPath.FindAllStringSubmatch(text, -1) {
			if _, ok := inside(file, m[1]); !ok {
				t.Errorf("%s: mentions %q, above the repository's root", file, m[1])
			}
		}
	}
}

// TestNoSharedFolderReferences: the design and the protocols live in docs/;
// no source file may send a reader to a folder beside the repository.
func TestNoSharedFolderReferences(t *testing.T) {
	t.Parallel()
	// Spelt in two parts so that this file does not match itself.
	outside := ".." + "/shared/"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sql", ".yml", ".yaml":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), outside) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s refers to %s, outside the repository: point to docs/ instead", filepath.ToSlash(rel), outside)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnchors checks the slug rule the link test relies on.
func TestAnchors(t *testing.T) {
	t.Parallel()
	got := anchors("# A title\n## `GET /v1/status`\n```\n# not a heading\n```\n### Shared Retry-After deferral\n## Dup\n## Dup\n")
	for _, want := range []string{"a-title", "get-v1status", "shared-retry-after-deferral", "dup", "dup-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block became an anchor: %v", got)
	}
}
