package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// graph is the module's packages (by import path) and what each imports
// in its non-test files.
type graph struct {
	module string
	pkgs   map[string][]string
}

// readGraph parses the imports of every non-test Go file under root.
func readGraph(t *testing.T, root string) graph {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	g := graph{pkgs: map[string][]string{}}
	for line := range strings.Lines(string(mod)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			g.module = strings.TrimSpace(m)
		}
	}
	require.NotEmpty(t, g.module, "module path in go.mod")
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := g.module + "/" + filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if !slices.Contains(g.pkgs[pkg], p) {
				g.pkgs[pkg] = append(g.pkgs[pkg], p)
			}
		}
		if _, ok := g.pkgs[pkg]; !ok {
			g.pkgs[pkg] = nil
		}
		return nil
	})
	require.NoError(t, err)
	return g
}

// deps returns everything pkg imports, directly or through packages of
// the module.
func (g graph) deps(pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range g.pkgs[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// rule forbids the packages under one of from to import (directly, or
// also through the module's packages when transitive) what starts with
// one of to.
type rule struct {
	why        string
	from, to   []string
	transitive bool
}

func (g graph) violations(r rule) []string {
	var out []string
	for pkg := range g.pkgs {
		if !underAny(pkg, g.prefixed(r.from)) {
			continue
		}
		imports := g.pkgs[pkg]
		if r.transitive {
			imports = g.deps(pkg)
		}
		for _, imp := range imports {
			if underAny(imp, g.prefixed(r.to)) {
				out = append(out, pkg+" imports "+imp+": "+r.why)
			}
		}
	}
	slices.Sort(out)
	return out
}

// prefixed puts the module path before the module's own paths.
func (g graph) prefixed(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if first, _, _ := strings.Cut(p, "/"); first == "internal" || first == "web" || first == "cmd" {
			p = g.module + "/" + p
		}
		out[i] = p
	}
	return out
}

func underAny(pkg string, prefixes []string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

var engine = []string{"internal/outbox", "internal/inbox", "internal/changefeed", "internal/reconcile", "internal/triage", "internal/action"}

var rules = []rule{
	{why: "templates and transports never import queries (they get view models and changes)",
		from: []string{"web/templates", "internal/sse", "internal/ws"}, to: []string{"internal/queries"}},
	{why: "the engine knows no console and no HTTP framework",
		from: engine, to: []string{"internal/console", "github.com/labstack/echo"}, transitive: true},
	{why: "nothing under internal imports the composition root",
		from: []string{"internal"}, to: []string{"cmd"}},
}

// TestImportsPointOneWay fails when an import points the wrong way.
func TestImportsPointOneWay(t *testing.T) {
	t.Parallel()
	g := readGraph(t, filepath.Join("..", ".."))
	require.Contains(t, g.pkgs, g.module+"/internal/outbox", "the module's packages were read")
	for _, r := range rules {
		require.Empty(t, g.violations(r))
	}
}

// TestRulesCatchWrongImports checks that each rule fails on the import it
// forbids, in a made-up graph: a rule that cannot fail protects nothing.
func TestRulesCatchWrongImports(t *testing.T) {
	t.Parallel()
	m := "example.com/m"
	g := graph{module: m, pkgs: map[string][]string{
		m + "/web/templates":        {m + "/internal/queries"},
		m + "/internal/ws":          {m + "/internal/queries"},
		m + "/internal/outbox":      {m + "/internal/helper"},
		m + "/internal/helper":      {"github.com/labstack/echo/v4"},
		m + "/internal/inbox":       {m + "/internal/console"},
		m + "/internal/destination": {m + "/cmd/console"},
		m + "/internal/console":     {"github.com/labstack/echo/v4", m + "/internal/queries"},
	}}
	var got []string
	for _, r := range rules {
		for _, v := range g.violations(r) {
			got = append(got, strings.SplitN(v, ":", 2)[0])
		}
	}
	require.ElementsMatch(t, []string{
		m + "/web/templates imports " + m + "/internal/queries",
		m + "/internal/ws imports " + m + "/internal/queries",
		m + "/internal/outbox imports github.com/labstack/echo/v4",
		m + "/internal/inbox imports " + m + "/internal/console",
		m + "/internal/inbox imports github.com/labstack/echo/v4",
		m + "/internal/destination imports " + m + "/cmd/console",
	}, got)
}
