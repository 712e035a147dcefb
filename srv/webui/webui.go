// Package webui serves the single-page UI built from web/ and embedded at
// build time. Before the UI is built it serves a page saying how to.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// dist holds the Vite build output (web/ builds into it). Only .gitkeep is
// committed, so a clean checkout builds without Node.
//
//go:embed all:dist
var dist embed.FS

// pages are the app's own routes (web/src/App.vue picks the view by
// path): each gets index.html, with or without a trailing slash.
var pages = map[string]bool{"/": true, "/index.html": true, "/booking": true, "/agui-demo": true}

// noticesFile is the licences of what the binary holds (make notices
// writes it into the build), served at /notices too.
const noticesFile = "THIRD_PARTY_NOTICES.txt"

// Handler serves the UI: hashed assets with long cache lifetimes, and
// index.html, uncached, for the app's pages so they survive a reload.
// Any other path is 404: a missing script is not answered with the page.
func Handler() http.Handler {
	sub, _ := fs.Sub(dist, "dist")
	return handler(sub)
}

func handler(sub fs.FS) http.Handler {
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		index = []byte(placeholder)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		p := path.Clean("/" + r.URL.Path)
		if p == "/notices" {
			p = "/" + noticesFile
		}
		page := pages[p]
		file := !page && isFile(sub, p)
		if !page && !file {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if file {
			if strings.HasPrefix(p, "/assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				// sw.js among them: a new build's service worker is seen
				// on the next load.
				w.Header().Set("Cache-Control", "no-cache")
			}
			switch {
			case strings.HasSuffix(p, ".webmanifest"):
				w.Header().Set("Content-Type", "application/manifest+json")
			case p == "/"+noticesFile:
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				http.ServeFileFS(w, r, sub, noticesFile)
				return
			}
			files.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(index)
	})
}

// isFile reports whether p names a regular file of the build; dot-files
// (.gitkeep) are not served.
func isFile(sub fs.FS, p string) bool {
	name := strings.TrimPrefix(p, "/")
	if name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "/.") {
		return false
	}
	st, err := fs.Stat(sub, name)
	return err == nil && st.Mode().IsRegular()
}

// setSecurityHeaders keeps the token out of Referer headers, forbids inline
// script and framing; the service worker and the manifest are our own.
func setSecurityHeaders(h http.Header) {
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "+
		"img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; object-src 'none'; "+
		"base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
}

const placeholder = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentassistant</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;color:#222}
code,pre{background:#f3f3f3;padding:.1em .3em;border-radius:4px}pre{padding:.8em}</style>
</head><body>
<h1>agentassistant-srv is running</h1>
<p>This binary was built without the web UI. Build it and restart the server:</p>
<pre>make run</pre>
<p>(<code>make run</code> installs the UI's npm packages, builds it with Vite and embeds it into
<code>agentassistant-srv</code>.) Meanwhile the server accepts agents' requests and any client of
the <code>/ws</code> protocol can answer them.</p>
</body></html>
`
