package throttle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"sort"
	"strings"
	"testing"
)

// maxExported bounds the package's exported identifiers (issue #25: a
// smaller public surface). Export what a user calls; keep the rest
// unexported or under internal/.
const maxExported = 100

// TestPublicSurface counts what the package exports outside its tests:
// types, functions, methods of exported types, constants and variables.
func TestPublicSurface(t *testing.T) {
	names := exportedNames(t, ".")
	if len(names) > maxExported {
		t.Errorf("throttle exports %d identifiers, more than %d:\n%s", len(names), maxExported, strings.Join(names, "\n"))
	}
	t.Logf("throttle exports %d identifiers (at most %d)", len(names), maxExported)
}

// exportedNames lists the exported identifiers of the package in dir, as
// "Name" or "Type.Method", sorted.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	notTest := func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, dir, notTest, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						names = append(names, d.Name.Name)
						continue
					}
					if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
						names = append(names, recv+"."+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								names = append(names, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									names = append(names, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// receiverName is the type name of a method's receiver: T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
