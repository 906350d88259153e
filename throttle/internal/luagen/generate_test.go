package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate fails when a committed lean script is not what its
// template and the modules' fragments generate now.
func TestGeneratedUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..", "lua")
	out, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no templates in lua/lean")
	}
	for name, want := range out {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v (run go generate ./throttle)", name, err)
		}
		if string(got) != want {
			t.Errorf("lua/%s is stale: run go generate ./throttle", name)
		}
	}
}

func TestRename(t *testing.T) {
	names := map[string]string{"w": "tw", "f": "tf", "b": "B"}
	used := map[string]bool{}
	got := rename(`if w < b.w and f > 1e-5 then x = "w" .. w end -- w's`, names, used)
	want := `if tw < B.w and tf > 1e-5 then x = "w" .. tw end -- tw's`
	if got != want {
		t.Errorf("rename = %q, want %q", got, want)
	}
}
