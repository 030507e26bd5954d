# platform-proxy: the two commands of the README, and their parts.
SHELL := /bin/bash
CONFIG ?= Config/platform-proxy.json
SWIFT_BUILD_FLAGS ?=

PYTHON ?= .venv/bin/python
# Each step of `make test` writes its whole output to .build/logs/<step>.log and prints one line when
# it passes, its failures when not (scripts/step.sh); VERBOSE=1 also streams the output.
STEP := scripts/step.sh

.PHONY: run test setup setup-build build release image unit integration integration-untuned check-config format lint bench clean

## run: install the build libraries, build, and serve the embedded default config on 127.0.0.1:8080
run: setup-build build
	.build/debug/platform-proxy serve --config $(CONFIG)

## test: install the build libraries and test peers (.venv for Python), build, run unit tests, build the
## container image, run the integration tests (test_container.py runs the image)
test: setup build unit image integration

setup-build:
	@scripts/setup.sh build

setup:
	@scripts/setup.sh test

build:
	@$(STEP) build swift build $(SWIFT_BUILD_FLAGS)

release:
	swift build -c release -Xswiftc -static-stdlib

## image: Docker/Dockerfile -> localhost/platform-proxy:latest with docker, else podman (installed on Debian);
## base images pulled, or made here with debootstrap when no registry answers; cached (scripts/image.sh)
image:
	@$(STEP) image scripts/image.sh

unit:
	@$(STEP) unit swift test $(SWIFT_BUILD_FLAGS)

# test_docker.py checks the libraries of the binary `make image` copied out of the image, when there
# is one, instead of building the same release binary again.
integration: build
	@PLATFORM_PROXY_BIN=$(CURDIR)/.build/debug/platform-proxy \
	PLATFORM_PROXY_STATIC_BIN=$$(ls $(CURDIR)/.build-container/platform-proxy 2>/dev/null) \
	$(STEP) integration $(PYTHON) -m pytest -q Tests/Integration

## integration-untuned: the integration tests again with the libcurl tuning off (PLATFORM_PROXY_CURL_TUNING=off:
## libcurl's calls are glibc's), which nothing correct may depend on; CI runs it after `make test`
integration-untuned: build
	@PLATFORM_PROXY_CURL_TUNING=off \
	PLATFORM_PROXY_BIN=$(CURDIR)/.build/debug/platform-proxy \
	PLATFORM_PROXY_STATIC_BIN=$$(ls $(CURDIR)/.build-container/platform-proxy 2>/dev/null) \
	$(STEP) integration-untuned $(PYTHON) -m pytest -q Tests/Integration

## check-config: the shipped configs; examples without their secrets (they name files and variables of a real deployment)
check-config: setup-build build
	.build/debug/platform-proxy check-config --config Config/platform-proxy.json
	for f in Config/examples/*.json Docker/*.json; do .build/debug/platform-proxy check-config --schema-only --config $$f || exit 1; done

## format: rewrite the Swift sources in the style of .swift-format (swift format, part of the toolchain)
## lint: fail on any place that differs from it. Rules left off there because they fight the house style:
## DoNotUseSemicolons (`case 0xE0: length = 3; low = 0xA0`), OneVariableDeclarationPerLine (`var h = start,
## p = pattern.startIndex`), OneCasePerLine (`case idle, uploading, backoff(until: Double)`),
## OnlyOneTrailingClosureArgument (named callbacks, then the completion as the trailing closure).
FORMAT_PATHS := Sources Tests Package.swift

format:
	swift format format --in-place --recursive --parallel $(FORMAT_PATHS)

lint:
	swift format lint --strict --recursive --parallel $(FORMAT_PATHS)

bench:
	@scripts/setup.sh bench
	bench/health.sh

clean:
	rm -rf .build .venv
