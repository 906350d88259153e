package throttle

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// One script per operation; each file's header documents its KEYS, ARGV and reply.
var (
	// nowLua sets `now` from ARGV[1] or Redis TIME; newScript puts it first.
	//go:embed lua/now.lua
	nowLua string
	// refundGuardLua is the slot check and marker of a policy's refund.
	//go:embed lua/refund_guard.lua
	refundGuardLua string

	//go:embed lua/reserve.lua
	reserveLua string
	//go:embed lua/refund.lua
	refundLua string
	//go:embed lua/cooldown.lua
	cooldownLua string
	//go:embed lua/cooldown_left.lua
	cooldownLeftLua string

	reserveScript      = newScript(reserveLua)
	refundScript       = newScript(refundLua)
	cooldownScript     = newScript(cooldownLua)
	cooldownLeftScript = newScript(cooldownLeftLua)
)

// newScript is a script that starts with now.lua, so every script reads the
// time one way.
func newScript(body string) *redis.Script { return redis.NewScript(nowLua + body) }

// newRefundScript is a policy's refund script (the algo contract in
// policy.go): now.lua, refund_guard.lua, then body.
func newRefundScript(body string) *redis.Script {
	return redis.NewScript(nowLua + refundGuardLua + body)
}
