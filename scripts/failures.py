#!/usr/bin/env python3
"""What to act on in the log of a failed test run (scripts/step.sh prints it).

    scripts/failures.py swift-testing|pytest LOG [LINES]

swift-testing: every failing test's issues (the expectation, its file and line, the comment);
what a test printed is in the log between its "started" and "failed" lines, among the lines of
the tests that ran beside it. When the run crashed, why and the crashed thread's frames; when
the tests did not build, the compiler's errors.

pytest: for every failing test its traceback's tail and the tail of each captured section (the
proxy's stderr, captured output), then pytest's list of failures.

LINES bounds each tail (30 unless given); at most MAX_DETAILED tests are shown in detail, the
rest by name.
"""

from __future__ import annotations

import re
import sys

MAX_DETAILED = 8
MAX_NAMES = 40

# Swift Testing's console events (a symbol, a space, the event).
FINISHED = re.compile(r'^(?:✔|✘) Test "(.*)"(?: with \d+ test cases?)? (?:passed|failed)')
FAILED = re.compile(r'^✘ Test "(.*)"(?: with \d+ test cases?)? failed')
ISSUE = re.compile(r'^✘ Test "(.*)" recorded an issue')
COMPILER_ERROR = re.compile(r"^[^ ]+:\d+:\d+: error: |^error: ")


def tail(lines: list[str], n: int) -> list[str]:
    """The last `n` lines."""
    return lines[-n:] if len(lines) > n else lines


def indent(lines: list[str], prefix: str = "    ") -> None:
    """Prints `lines`, each after `prefix`."""
    for line in lines:
        print(prefix + line)


def swift_testing(lines: list[str], n: int) -> None:
    """The failures of a `swift test` log (Swift Testing's console output)."""
    if not any("Test run started" in line for line in lines):
        errors = sorted(set(line for line in lines if COMPILER_ERROR.search(line)))
        print("  the tests did not build:" if errors else "  the test run did not start:")
        indent(errors[:40])
        print(f"--- last {n} lines of the log")
        indent(tail(lines, n), "")
        return

    issues: dict[str, list[str]] = {}
    failed: list[str] = []
    in_issue = None
    for line in lines:
        if in_issue and line.startswith("↳ "):
            issues[in_issue].append(line)
            continue
        in_issue = None
        if m := ISSUE.match(line):
            in_issue = m.group(1)
            issues.setdefault(in_issue, []).append(line)
        elif m := FINISHED.match(line):
            name = m.group(1)
            if FAILED.match(line):
                failed.append(name)
                if name not in issues:
                    issues[name] = [line]

    for name in failed[:MAX_DETAILED]:
        indent(issues[name], "  ")
    if len(failed) > MAX_DETAILED:
        print(f"  and {len(failed) - MAX_DETAILED} more failing tests:")
        indent([f'"{name}"' for name in failed[MAX_DETAILED:MAX_DETAILED + MAX_NAMES]])
    ended = [line for line in lines if re.match(r"^(✔|✘) Test run with ", line)]
    if ended:
        print("  " + ended[-1])
    else:
        crashed(lines, n)


CRASH = re.compile(r"Fatal error: |Precondition failed|Assertion failed|\*\*\* Program crashed|"
                   r"error: Exited with|Segmentation fault|Illegal instruction")


def crashed(lines: list[str], n: int) -> None:
    """The test process stopped (a trap, a signal): why, and the crashed thread's first frames.

    Swift Testing announces most tests as started before it runs them, so the tests "running" at
    the crash are no clue; the crashed thread's frames name the test.
    """
    print("  the test run did not finish:")
    indent(sorted(set(line for line in lines if CRASH.search(line)), key=lines.index))
    for i, line in enumerate(lines):
        if re.match(r'^Thread \d+ .*crashed:$', line):
            frames = [f[:200] for f in lines[i + 1:i + 2 + min(12, n)] if f.strip()]
            print("  " + line)
            indent(frames)
            break


SECTION = re.compile(r"^=+ (.*?) =+$")
TEST_HEADER = re.compile(r"^_+ (.*?) _+$")
SUB_HEADER = re.compile(r"^-+ (.*?) -+$")
# pytest's last line ("1 failed, 1010 passed, 1 skipped in 480.12s (0:08:00)"), framed by = without -q.
CLOSING = re.compile(r"^(?:=+ )?(\d+ \w+.* in [0-9.]+s\b.*?)(?: =+)?$")


def pytest(lines: list[str], n: int) -> None:
    """The failures of a pytest log: its ERRORS and FAILURES sections, test by test."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if m := SECTION.match(line):
            current = m.group(1)
            sections[current] = []
        elif current is not None:
            sections[current].append(line)

    blocks: list[tuple[str, list[str]]] = []  # (test, its report) from FAILURES and ERRORS
    for title in ("ERRORS", "FAILURES"):
        name = None
        for line in sections.get(title, []):
            if m := TEST_HEADER.match(line):
                name = m.group(1)
                blocks.append((name, []))
            elif name is not None:
                blocks[-1][1].append(line)

    for name, report in blocks[:MAX_DETAILED]:
        print(f"  ___ {name}")
        parts: list[tuple[str, list[str]]] = [("traceback", [])]
        for line in report:
            if m := SUB_HEADER.match(line):
                parts.append((m.group(1), []))
            else:
                parts[-1][1].append(line)
        for title, body in parts:
            while body and not body[-1].strip():
                body.pop()
            while body and not body[0].strip():
                body.pop(0)
            if not body:
                continue
            if title != "traceback":
                print(f"    --- {title}")
            indent(tail(body, n))
    if len(blocks) > MAX_DETAILED:
        print(f"  and {len(blocks) - MAX_DETAILED} more; pytest's list:")

    summary = [line for line in sections.get("short test summary info", [])
               if line.startswith(("FAILED ", "ERROR "))]
    if summary:
        indent(summary[:MAX_NAMES], "  ")
        if len(summary) > MAX_NAMES:
            print(f"  ... and {len(summary) - MAX_NAMES} more")
    closing = [m.group(1) for line in lines if (m := CLOSING.match(line))]
    if closing:
        print("  " + closing[-1])
    if not blocks:
        # Interrupted, or stopped before any test report: the log's end says why.
        print(f"--- last {n} lines of the log")
        indent(tail(lines, n), "")


def main() -> int:
    kind, path = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    {"swift-testing": swift_testing, "pytest": pytest}[kind](lines, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
