package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/internal/verify"
)

// MaxSize bounds a document, and each file it refers to.
const MaxSize = 16 << 20

// Load reads and checks the OpenAPI document at source: a file path, or
// an https URL (read once, at load). A document in a file may refer to
// other files in its folder or below it ($ref: common.yaml#/…); a
// document read from a URL may refer to nothing outside itself, so that
// it cannot make the gateway read its files or reach other hosts. Every
// $ref is resolved, and those into other files are made components of
// the document.
func Load(ctx context.Context, source string) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = true
	var doc *openapi3.T
	var err error
	if u, isURL := remote(source); isURL {
		data, rerr := fetch(ctx, u)
		if rerr != nil {
			return nil, rerr
		}
		loader.ReadFromURIFunc = func(*openapi3.Loader, *url.URL) ([]byte, error) {
			return nil, errors.New("a document read from a URL may not refer to other documents")
		}
		doc, err = loader.LoadFromDataWithPath(data, u)
	} else {
		root, aerr := filepath.Abs(filepath.Dir(source))
		if aerr != nil {
			return nil, aerr
		}
		loader.ReadFromURIFunc = inFolder(root)
		doc, err = loader.LoadFromFile(source)
	}
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("invalid document: %w", err)
	}
	doc.InternalizeRefs(ctx, nil)
	return doc, nil
}

// remote reports whether source is a URL, which must be https.
func remote(source string) (*url.URL, bool) {
	if !strings.Contains(source, "://") {
		return nil, false
	}
	u, err := url.Parse(source)
	if err != nil {
		return &url.URL{Scheme: "invalid", Opaque: source}, true
	}
	return u, true
}

// fetch reads a document from an https URL (http only to a loopback
// host), within MaxSize and a minute.
func fetch(ctx context.Context, u *url.URL) ([]byte, error) {
	if err := verify.CheckSecureURL(u.String()); err != nil {
		return nil, fmt.Errorf("a document URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", u.Redacted(), resp.StatusCode)
	}
	return readLimited(resp.Body)
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	return data, nil
}

// inFolder reads the files a document refers to, only within root: no
// URL, no file outside it (a `..` that climbs out, a symlink that points
// out).
func inFolder(root string) openapi3.ReadFromURIFunc {
	return func(_ *openapi3.Loader, location *url.URL) ([]byte, error) {
		if location.Scheme != "" || location.Host != "" {
			return nil, fmt.Errorf("%s: a document may refer to files beside it, not to URLs", location.Redacted())
		}
		path, err := filepath.Abs(filepath.FromSlash(location.Path))
		if err != nil {
			return nil, err
		}
		if real, err := filepath.EvalSymlinks(path); err == nil {
			path = real
		}
		realRoot := root
		if r, err := filepath.EvalSymlinks(root); err == nil {
			realRoot = r
		}
		if rel, err := filepath.Rel(realRoot, path); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("%s: outside the document's folder", location.Path)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readLimited(f)
	}
}
