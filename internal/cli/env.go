package cli

import (
	"flag"
	"strings"
)

// EnvPrefix starts the environment variable of every flag: --limiter-redis
// is SLUICE_LIMITER_REDIS.
const EnvPrefix = "SLUICE_"

// EnvName is the environment variable that gives flag name a value.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Repeatable marks a flag.Value that may be given more than once. Its
// environment variable holds several values, one per line or separated by
// ";".
type Repeatable interface {
	flag.Value
	Repeatable()
}

// fromEnv sets every flag of fs that the command line did not set from its
// environment variable (EnvName), as lookup finds it, if that is set and not
// blank, so that a flag wins over its variable. It runs after fs.Parse. An
// invalid value is a usage error naming the variable. Flags named in skip
// (help, version) are never read from the environment.
func fromEnv(fs *flag.FlagSet, lookup func(string) (string, bool), skip ...string) error {
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, s := range skip {
		set[s] = true
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		values := []string{v}
		if _, many := f.Value.(Repeatable); many {
			values = strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == ';' })
		}
		for _, one := range values {
			if e := fs.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = Usagef("%s=%q: %v", name, one, e)
				return
			}
		}
	})
	return err
}
