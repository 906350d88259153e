// Command luagen writes the lean scripts of throttle/lua from their
// templates in lua/lean and the fragments of the policy modules they name,
// so that each policy's arithmetic is written once (go generate ./throttle).
//
// A module marks a fragment with a line "--{ name" before it and "--}" after
// it; the lines between are ordinary Lua over local variables, run in place
// by the general scripts. A template's line "--= name old=new ..." is
// replaced by that fragment, indented as the line, with each variable old
// named new (in its code and its comments). A generated file opens with a
// line saying so.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := "lua"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	out, err := generate(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "luagen:", err)
		os.Exit(1)
	}
	for name, text := range out {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "luagen:", err)
			os.Exit(1)
		}
	}
}
