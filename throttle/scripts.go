package throttle

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// One script per operation; each file's header documents its KEYS, ARGV and reply.
var (
	//go:embed lua/reserve.lua
	reserveLua string
	//go:embed lua/refund.lua
	refundLua string
	//go:embed lua/cooldown.lua
	cooldownLua string
	//go:embed lua/cooldown_left.lua
	cooldownLeftLua string

	reserveScript      = redis.NewScript(reserveLua)
	refundScript       = redis.NewScript(refundLua)
	cooldownScript     = redis.NewScript(cooldownLua)
	cooldownLeftScript = redis.NewScript(cooldownLeftLua)
)
