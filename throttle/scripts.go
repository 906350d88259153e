package throttle

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The lean scripts (reserve_tat.lua, reserve_fw.lua, reserve_sw.lua,
// reserve_sl.lua) are generated from their templates in lua/lean and the
// fragments of the modules they take their arithmetic from.
//go:generate go run ./internal/luagen lua

// The bucket scripts are composed from files in lua/: now.lua, prelude.lua
// and holes.lua, the modules of the policies a call uses (tat.lua, then
// tb.lua, lb.lua, fw.lua, sl.lua, sw.lua), then the operation's main file
// (reserve's after share.lua).
// A call whose buckets share one policy runs the script with that module
// only; a call mixing policies runs the one with every module. Each file's
// header documents its part: KEYS, ARGV and reply in the main files.
var (
	//go:embed lua/now.lua
	nowLua string
	//go:embed lua/prelude.lua
	preludeLua string
	//go:embed lua/holes.lua
	holesLua string
	//go:embed lua/tat.lua
	tatLua string
	//go:embed lua/tb.lua
	tbLua string
	//go:embed lua/lb.lua
	lbLua string
	//go:embed lua/fw.lua
	fwLua string
	//go:embed lua/sl.lua
	slLua string
	//go:embed lua/sw.lua
	swLua string
	//go:embed lua/cw.lua
	cwLua string

	//go:embed lua/share.lua
	shareLua string
	//go:embed lua/reserve.lua
	reserveLua string
	//go:embed lua/reserve_one.lua
	reserveOneLua string
	//go:embed lua/reserve_batch.lua
	reserveBatchLua string
	//go:embed lua/int.lua
	intLua string
	//go:embed lua/reserve_tat.lua
	reserveTATLua string
	//go:embed lua/reserve_fw.lua
	reserveFWLua string
	//go:embed lua/reserve_sw.lua
	reserveSWLua string
	//go:embed lua/reserve_sl.lua
	reserveSLLua string
	//go:embed lua/refund.lua
	refundLua string
	//go:embed lua/settle.lua
	settleLua string
	//go:embed lua/giveback.lua
	giveBackLua string
	//go:embed lua/cooldown.lua
	cooldownLua string
	//go:embed lua/peek.lua
	peekLua string
	//go:embed lua/adapt.lua
	adaptLua string
	//go:embed lua/cooldown_left.lua
	cooldownLeftLua string

	cooldownLeftScript = newScript(cooldownLeftLua)
	adaptScript        = newScript(adaptLua)
	reserveTBScript    = newScript("local tb, adaptive = true, false\n" + reserveTATLua)
	reserveLBScript    = newScript("local tb, adaptive = false, false\n" + reserveTATLua)
	reserveATScript    = newScript(intLua + "\nlocal tb, adaptive = true, true\n" + reserveTATLua) // an adaptive bucket: int.lua's atrate
	reserveFWScript    = newScript(reserveFWLua)
	reserveSLScript    = newScript(reserveSLLua)
	reserveSWScript    = newScript(reserveSWLua)
)

// scriptOp is a bucket script's operation.
type scriptOp int

const (
	scriptReserve scriptOp = iota
	scriptBatch            // many reserve calls of one shape (coalesce.go)
	scriptRefund
	scriptSettle
	scriptGiveBack // prefetched grants nobody took (prefetch.go)
	scriptCooldown
	scriptPeek
	numScriptOps
)

// mixed indexes the scripts with every module, for calls that mix policies.
const mixed = numKinds

// bucketScripts[scriptOp][kind] runs op on buckets of that kind (or mixed).
var bucketScripts = func() (s [numScriptOps][numKinds + 1]*redis.Script) {
	modules := [numKinds]string{
		kindTB: tatLua + tbLua,
		kindLB: tatLua + lbLua,
		kindFW: fwLua,
		kindSL: slLua,
		kindSW: swLua,
		kindCW: cwLua,
	}
	all := tatLua + tbLua + lbLua + fwLua + slLua + swLua + cwLua
	mains := [numScriptOps]string{
		scriptReserve:  shareLua + "\n" + reserveLua + "\n" + reserveOneLua,
		scriptBatch:    shareLua + "\n" + reserveLua + "\n" + reserveBatchLua,
		scriptRefund:   refundLua,
		scriptSettle:   settleLua,
		scriptGiveBack: giveBackLua,
		scriptCooldown: cooldownLua,
		scriptPeek:     peekLua,
	}
	for o, main := range mains {
		for k := range modules {
			s[o][k] = bucketScript(modules[k], main)
		}
		s[o][mixed] = bucketScript(all, main)
	}
	return s
}()

func bucketScript(modules, main string) *redis.Script {
	var b strings.Builder
	for _, part := range []string{nowLua, intLua, preludeLua, holesLua, modules, main} {
		b.WriteString(part)
		b.WriteString("\n")
	}
	return redis.NewScript(b.String())
}

// newScript is a script that starts with now.lua, so every script reads the
// time one way.
func newScript(body string) *redis.Script { return redis.NewScript(nowLua + body) }
