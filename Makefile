.PHONY: test bench load quickstart

test:
	./scripts/test

bench:
	go test -run '^$$' -bench . -benchmem ./throttle/

load:
	go run ./cmd/load

quickstart:
	go run ./examples/quickstart
