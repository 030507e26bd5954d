# platform-proxy: the two commands of the README, and their parts.
SHELL := /bin/bash
CONFIG ?= Config/platform-proxy.json
SWIFT_BUILD_FLAGS ?=

.PHONY: run test setup build release unit integration check-config bench clean

## run: set up the machine, build, and serve the embedded default config on 127.0.0.1:8080
run: setup build
	.build/debug/platform-proxy serve --config $(CONFIG)

## test: set up the machine (apt + pip test peers), build, run unit and integration tests
test: setup build unit integration

setup:
	@scripts/setup.sh

build:
	swift build $(SWIFT_BUILD_FLAGS)

release:
	swift build -c release -Xswiftc -static-stdlib

unit:
	swift test $(SWIFT_BUILD_FLAGS)

integration: build
	PLATFORM_PROXY_BIN=$(CURDIR)/.build/debug/platform-proxy python3 -m pytest -q Tests/Integration

check-config: build
	for f in Config/platform-proxy.json Config/examples/*.json; do .build/debug/platform-proxy check-config --config $$f || exit 1; done

bench: setup
	bench/health.sh

clean:
	rm -rf .build
