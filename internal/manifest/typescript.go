package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// A TypeScript manifest (tools.ts) is compiled at load by the kit's
// compiler, toolgate-tools (packages/kit), which runs on Node: it imports
// the file, converts each Zod schema with Zod's own z.toJSONSchema and
// prints the JSON manifest, which is then read like a manifest file.

// Compiler is the name of the kit's compiler: its bin in node_modules/.bin,
// or a command on PATH.
const Compiler = "toolgate-tools"

// compileTimeout bounds one run of the compiler. Loading a tools.ts takes
// well under a second warm and a few seconds on a cold disk; a compiler
// stuck longer would hold Caddy's config load.
var compileTimeout = 30 * time.Second

// maxCompilerMessage bounds the compiler's stderr carried into the config
// error: its errors are one line per problem, and a crash's stack trace is
// not worth more than its first lines.
const maxCompilerMessage = 4 << 10

// IsTypeScript reports whether path names a TypeScript manifest.
func IsTypeScript(path string) bool {
	switch filepath.Ext(path) {
	case ".ts", ".mts":
		return true
	}
	return false
}

// FindCompiler returns the compiler for a tools.ts in dir: the nearest
// node_modules/.bin/toolgate-tools in dir or a parent (where npm installs
// the package's bin, and where Node resolves the file's own imports such as
// zod), else toolgate-tools on PATH.
func FindCompiler(dir string) (string, error) {
	for d := dir; ; {
		p := filepath.Join(d, "node_modules", ".bin", Compiler)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return exec.LookPath(Compiler)
}

// compileTypeScript runs the compiler on the file at path and returns the
// manifest it printed. Errors do not repeat path: the caller names it.
func compileTypeScript(path string) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// A missing file is said as for a JSON manifest, before anything about
	// Node.
	if _, err := os.Stat(abs); err != nil {
		return nil, err
	}
	ahead := aheadOfTime(path)
	// The compiler is a Node script (#!/usr/bin/env node): without node it
	// cannot start, and the exec error would not say why.
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("a TypeScript manifest is compiled with Node.js, and node is not on PATH; %s", ahead)
	}
	dir := filepath.Dir(abs)
	compiler, err := FindCompiler(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed (no node_modules/.bin/%[1]s in %s or a parent, none on PATH): install @toolgate/kit there with npm; %s", Compiler, dir, ahead)
	}

	ctx, cancel := context.WithTimeout(context.Background(), compileTimeout)
	defer cancel()
	// No shell: the compiler and the file are arguments of their own, the
	// file absolute (so never read as an option), and nothing from a
	// request ever reaches this command line.
	cmd := exec.CommandContext(ctx, compiler, "build", abs)
	cmd.Dir = dir
	stdout := &capped{max: MaxSize, over: cancel}
	stderr := &capped{max: maxCompilerMessage}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The compiler may leave a child (esbuild's service) holding the pipes
	// after it was killed; do not wait on it for long.
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	switch {
	case stdout.overflow:
		return nil, fmt.Errorf("%s build printed more than %d bytes", compiler, MaxSize)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s build did not finish within %s", compiler, compileTimeout)
	case err != nil:
		if msg := printable(stderr.buf.String(), stderr.overflow); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("%s build: %w", compiler, err)
	}
	return stdout.buf.Bytes(), nil
}

// aheadOfTime says how to do without Node at load: compile the manifest
// ahead and name the JSON file instead.
func aheadOfTime(path string) string {
	out := strings.TrimSuffix(path, filepath.Ext(path)) + ".json"
	return fmt.Sprintf("compile it ahead with `npx %s build %s -o %s` and use `manifest %s`", Compiler, path, out, out)
}

// printable trims the compiler's message and drops control characters
// (terminal escapes among them) but line breaks: it goes into a config
// error that the admin API answers and the log records.
func printable(s string, truncated bool) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return -1
	}, s)
	s = strings.TrimSpace(s)
	if truncated {
		s += " …"
	}
	return s
}

// capped keeps the first max bytes written to it. Past them it records the
// overflow, calls over (if set) and drops the rest, still reporting
// success, so that a writer is never blocked on a full pipe. (The buffer is
// a field, not embedded: an embedded bytes.Buffer's ReadFrom would let
// io.Copy bypass Write and its limit.)
type capped struct {
	buf      bytes.Buffer
	max      int
	overflow bool
	over     func()
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.overflow && c.over != nil {
			c.over()
		}
		c.overflow = true
		return len(p), nil
	}
	return c.buf.Write(p)
}
