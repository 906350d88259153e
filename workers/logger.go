package workers

import (
	"context"
	"fmt"
	"log/slog"
)

// asynqLogger passes asynq's logs to a slog.Logger, tagged component=asynq.
// It implements asynq.Logger.
type asynqLogger struct{ l *slog.Logger }

func newAsynqLogger(l *slog.Logger) asynqLogger {
	return asynqLogger{l: l.With("component", "asynq")}
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args) }

// Fatal logs at Error level and returns. asynq.Logger asks it to exit the
// process, but a library must not end its user's program (that skips the
// pool's shutdown and the caller's own); asynq v0.26 never calls it.
func (a asynqLogger) Fatal(args ...any) {
	a.log(slog.LevelError, args)
}

func (a asynqLogger) log(level slog.Level, args []any) {
	ctx := context.Background()
	if !a.l.Enabled(ctx, level) {
		return
	}
	a.l.Log(ctx, level, fmt.Sprint(args...))
}
