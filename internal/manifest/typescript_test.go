package manifest_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/manifest"
)

// The compilers here are shell scripts standing in for toolgate-tools, so
// these tests run without Node; caddymodule tests the real one.

// script writes an executable shell script. PATH is a test's own folder
// in most cases here, so scripts call only shell builtins.
func script(t *testing.T, path, body string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts stand in for the compiler")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func binIn(dir string) string {
	return filepath.Join(dir, "node_modules", ".bin", manifest.Compiler)
}

func TestFindCompiler(t *testing.T) {
	for _, c := range []struct {
		name string
		// where compilers are installed, relative to the test's root;
		// "PATH" is the folder on PATH.
		installed []string
		// in is where tools.ts lives, relative to the root.
		in   string
		want string // "" for none found
	}{
		{name: "in the folder", installed: []string{"app"}, in: "app", want: "app"},
		{name: "in a parent", installed: []string{"."}, in: "app/tools", want: "."},
		{name: "the nearest of two", installed: []string{".", "app"}, in: "app/tools", want: "app"},
		{name: "a folder beside is not a parent", installed: []string{"other"}, in: "app", want: ""},
		{name: "on PATH", installed: []string{"PATH"}, in: "app", want: "PATH"},
		{name: "node_modules before PATH", installed: []string{"PATH", "app"}, in: "app", want: "app"},
		{name: "none", in: "app", want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			pathDir := filepath.Join(root, "PATH")
			t.Setenv("PATH", pathDir)
			where := func(rel string) string {
				if rel == "PATH" {
					return filepath.Join(pathDir, manifest.Compiler)
				}
				return binIn(filepath.Join(root, rel))
			}
			for _, rel := range c.installed {
				script(t, where(rel), "exit 0")
			}
			in := filepath.Join(root, c.in)
			if err := os.MkdirAll(in, 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := manifest.FindCompiler(in)
			if c.want == "" {
				if !errors.Is(err, exec.ErrNotFound) {
					t.Fatalf("FindCompiler = %q, %v; want none found", got, err)
				}
				return
			}
			if err != nil || got != where(c.want) {
				t.Fatalf("FindCompiler = %q, %v; want %q", got, err, where(c.want))
			}
		})
	}
	t.Run("a folder named like the compiler is not one", func(t *testing.T) {
		root := t.TempDir()
		t.Setenv("PATH", filepath.Join(root, "PATH"))
		if err := os.MkdirAll(binIn(root), 0o755); err != nil {
			t.Fatal(err)
		}
		if got, err := manifest.FindCompiler(root); err == nil {
			t.Fatalf("FindCompiler = %q", got)
		}
	})
}

const goodManifest = `{"tools":[{"name":"ping","description":"Ping.","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"ping"}}]}`

// tsProject makes a folder with tools.ts, a compiler in its node_modules
// running body, and node on PATH (a stand-in: the compiler is the script,
// node is only looked for). It returns the tools.ts path and a file the
// compiler may write its arguments and working directory to.
func tsProject(t *testing.T, body string) (tools, seen string) {
	t.Helper()
	root := t.TempDir()
	pathDir := filepath.Join(root, "bin")
	script(t, filepath.Join(pathDir, "node"), "exit 1")
	t.Setenv("PATH", pathDir)
	app := filepath.Join(root, "app")
	seen = filepath.Join(root, "seen")
	script(t, binIn(app), strings.ReplaceAll(body, "$SEEN", seen))
	tools = filepath.Join(app, "tools.ts")
	if err := os.WriteFile(tools, []byte("export const tools = []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tools, seen
}

func TestReadFileTypeScript(t *testing.T) {
	tools, seen := tsProject(t, `printf '%s\n%s\n' "$*" "$PWD" > "$SEEN"
printf '%s\n' '`+goodManifest+`'`)
	src, err := manifest.ReadFile(tools)
	if err != nil {
		t.Fatal(err)
	}
	if src.Name != "manifest "+tools || len(src.Tools) != 1 || src.Tools[0].Name != "ping" {
		t.Errorf("ReadFile = %+v", src)
	}
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if want := "build " + tools + "\n" + filepath.Dir(tools) + "\n"; string(got) != want {
		t.Errorf("the compiler ran as\n%s\nwant (arguments, then working directory)\n%s", got, want)
	}
}

// A relative path is named as given in errors, and given to the compiler
// made absolute (it runs in the file's folder).
func TestReadFileTypeScriptRelative(t *testing.T) {
	tools, seen := tsProject(t, `printf '%s\n' "$*" > "$SEEN"
echo 'toolgate-tools: bad' >&2
exit 1`)
	t.Chdir(filepath.Dir(filepath.Dir(tools)))
	_, err := manifest.ReadFile("app/tools.ts")
	if err == nil || err.Error() != "manifest app/tools.ts: toolgate-tools: bad" {
		t.Fatalf("ReadFile: %v", err)
	}
	if got, _ := os.ReadFile(seen); string(got) != "build "+tools+"\n" {
		t.Errorf("the compiler got %q", got)
	}
}

func TestReadFileTypeScriptErrors(t *testing.T) {
	const ahead = "compile it ahead with `npx toolgate-tools build {path} -o {json}` and use `manifest {json}`"
	for _, c := range []struct {
		name, body string
		// setup changes the project before the load; it returns the
		// path to load.
		setup func(t *testing.T, tools string) string
		// want is the error after "manifest {path}: ", with {path},
		// {json} (the path ending in .json), {dir} (its folder) and
		// {bin} (the compiler) replaced.
		want string
	}{
		{
			name: "the compiler's error",
			body: `echo 'toolgate-tools: tools.ts: tool "a": input: not a Zod object' >&2; exit 1`,
			want: `toolgate-tools: tools.ts: tool "a": input: not a Zod object`,
		},
		{
			name: "its message trimmed, without control characters",
			body: `printf '\n  \033[31mtoolgate-tools: red\033[0m\r\n\n' >&2; exit 1`,
			want: `[31mtoolgate-tools: red[0m`,
		},
		{
			name: "a long message cut at 4 KiB",
			body: `line=x; i=0; while [ $i -lt 13 ]; do line=$line$line; i=$((i+1)); done; echo "$line" >&2; exit 1`,
			want: strings.Repeat("x", 4096) + " …",
		},
		{
			name: "a silent failure",
			body: `exit 3`,
			want: `{bin} build: exit status 3`,
		},
		{
			name: "a failure after printing a manifest",
			body: `printf '%s\n' '` + goodManifest + `'; echo 'toolgate-tools: late' >&2; exit 1`,
			want: `toolgate-tools: late`,
		},
		{
			name: "output that is not a manifest",
			body: `echo 'compiled 1 tool'`,
			want: `invalid JSON: jsontext: invalid character 'c' at start of value`,
		},
		{
			name: "two documents",
			body: `echo '{"tools":[]}{"tools":[]}'`,
			want: `invalid JSON: trailing data after the document`,
		},
		{
			name: "unknown fields, as in a JSON manifest",
			body: `echo '{"tools":[],"version":1}'`,
			want: `invalid JSON: json: unknown field "version"`,
		},
		{
			name: "a missing file",
			body: `exit 0`,
			setup: func(t *testing.T, tools string) string {
				return filepath.Join(filepath.Dir(tools), "nope.mts")
			},
			want: `stat {path}: no such file or directory`,
		},
		{
			name: "node not on PATH",
			body: `exit 0`,
			setup: func(t *testing.T, tools string) string {
				t.Setenv("PATH", t.TempDir())
				return tools
			},
			want: "a TypeScript manifest is compiled with Node.js, and node is not on PATH; " + ahead,
		},
		{
			name: "no compiler",
			body: `exit 0`,
			setup: func(t *testing.T, tools string) string {
				if err := os.RemoveAll(filepath.Join(filepath.Dir(tools), "node_modules")); err != nil {
					t.Fatal(err)
				}
				return tools
			},
			want: "toolgate-tools is not installed (no node_modules/.bin/toolgate-tools in {dir} or a parent, none on PATH): install @toolgate/kit there with npm; " + ahead,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			tools, _ := tsProject(t, c.body)
			path := tools
			if c.setup != nil {
				path = c.setup(t, tools)
			}
			_, err := manifest.ReadFile(path)
			want := "manifest {path}: " + c.want
			want = strings.NewReplacer(
				"{path}", path,
				"{json}", strings.TrimSuffix(path, filepath.Ext(path))+".json",
				"{dir}", filepath.Dir(path),
				"{bin}", binIn(filepath.Dir(tools)),
			).Replace(want)
			if err == nil || err.Error() != want {
				t.Fatalf("ReadFile: %v\nwant:      %s", err, want)
			}
		})
	}
}

// A manifest the compiler printed is checked as a JSON file is: the
// error names the .ts file and the tool.
func TestLoadTypeScriptChecksTools(t *testing.T) {
	tools, _ := tsProject(t, `echo '{"tools":[{"name":"a b","description":"d","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"x"}}]}'`)
	_, err := manifest.Load([]string{tools}, nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "manifest "+tools+`: tool "a b": name "a b" must match`) {
		t.Fatalf("Load: %v", err)
	}
}

func TestReadFileTypeScriptLimits(t *testing.T) {
	t.Run("output over the size limit", func(t *testing.T) {
		// 64 KiB lines, printed until the gateway stops listening.
		tools, _ := tsProject(t, `line=x; i=0; while [ $i -lt 16 ]; do line=$line$line; i=$((i+1)); done
while :; do echo "$line" || exit 1; done`)
		start := time.Now()
		_, err := manifest.ReadFile(tools)
		if err == nil || !strings.HasSuffix(err.Error(), " build printed more than 8388608 bytes") {
			t.Fatalf("ReadFile: %v", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("stopping the compiler took %s", took)
		}
	})
	t.Run("a compiler that does not finish", func(t *testing.T) {
		manifest.SetCompileTimeout(t, 300*time.Millisecond)
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Skip("no sleep command")
		}
		// Not exec: the child sleep keeps the output pipe open after
		// the shell is killed, as a compiler's own children may.
		tools, _ := tsProject(t, sleep+" 20")
		start := time.Now()
		_, err = manifest.ReadFile(tools)
		if err == nil || !strings.HasSuffix(err.Error(), " build did not finish within 300ms") {
			t.Fatalf("ReadFile: %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("giving up took %s", took)
		}
	})
}

func TestReadFileSizeLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(`{"tools":[]}`+strings.Repeat(" ", manifest.MaxSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := manifest.ReadFile(path)
	if err == nil || err.Error() != "manifest "+path+": larger than 8388608 bytes" {
		t.Fatalf("ReadFile: %v", err)
	}
}
