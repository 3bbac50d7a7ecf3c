#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time (scripts/test.sh calls it).

    scripts/run-tests.py EXECUTABLES [--jobs N] [--times FILE]

EXECUTABLES: the JSON lines of `cargo test --no-run --message-format=json...`, which name
every test binary, its package and its source. Most binaries spend their time waiting on
the test hub, agents and timers, so running a few at once keeps two cores busy; cargo runs
them one after another.

Two rules keep them apart where they would meet:
- a binary whose test source has a line starting `// run-tests: alone` (it changes
  cluster-wide objects of the shared test hub, CRDs or ClusterRoles, or needs the hub's
  controllers free of other tests' work) runs with no other binary, before the others;
- the binaries of one package listed in ONE_AT_A_TIME share one environment (the e2e
  hub and spokes) and run one at a time.

Each binary runs in its package's directory, as cargo runs it; its output is printed whole
when it ends, under cargo's own "Running" line, so that its `test result:` line reads as
cargo's. A binary that fails beside others is run once more alone: it has failed only if it
fails there too (one that passes alone is named at the end, to be made robust). Ends with the
slowest binaries, a closing `N passed, N failed` line and a non-zero exit when any binary
failed. --times FILE: each binary's last time, read to start the
longest first and written back.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

ALONE_MARK = "// run-tests: alone"
ONE_AT_A_TIME = {"mwrs-e2e"}
# A binary still running after this long is stopped and counted failed.
BINARY_TIMEOUT_SECS = 20 * 60
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")


class Binary:
    def __init__(self, message):
        target = message["target"]
        self.executable = message["executable"]
        self.package = message["package_id"].split("#")[-1].split("@")[0]
        self.name = f"{self.package} {','.join(target['kind'])} {target['name']}"
        self.directory = os.path.dirname(message["manifest_path"])
        self.source = os.path.relpath(target["src_path"], self.directory)
        with open(target["src_path"], encoding="utf-8", errors="replace") as f:
            self.alone = any(line.startswith(ALONE_MARK) for line in f)
        self.group = self.package if self.package in ONE_AT_A_TIME else None
        self.secs = 0.0
        self.output = ""
        self.passed = self.failed = 0
        self.ok = False

    def run(self):
        start = time.monotonic()
        try:
            done = subprocess.run(
                [self.executable],
                cwd=self.directory,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=BINARY_TIMEOUT_SECS,
                check=False,
            )
            self.output = done.stdout.decode("utf-8", errors="replace")
            self.ok = done.returncode == 0
        except subprocess.TimeoutExpired as e:
            self.output = (e.stdout or b"").decode("utf-8", errors="replace")
            self.output += f"\nrun-tests.py: stopped after {BINARY_TIMEOUT_SECS} s\n"
        self.secs = time.monotonic() - start
        for line in self.output.splitlines():
            result = RESULT.match(line)
            if result:
                self.passed += int(result[1])
                self.failed += int(result[2])
        if not self.ok and self.failed == 0:
            self.failed = 1

    def report(self):
        relative = os.path.relpath(self.executable)
        return f"     Running {self.source} ({relative})\n{self.output}"


def binaries(executables_path):
    found = []
    with open(executables_path, encoding="utf-8") as lines:
        for line in lines:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("reason") == "compiler-artifact" and message.get("executable"):
                if message.get("profile", {}).get("test"):
                    found.append(Binary(message))
    return found


class Scheduler:
    """Hands out binaries to workers under the two rules, longest first."""

    def __init__(self, todo, jobs):
        self.todo = todo
        self.jobs = jobs
        self.running = []
        self.lock = threading.Condition()
        self.printed = threading.Lock()

    def may_start(self, b):
        if not self.running:
            return True
        if b.alone or any(r.alone for r in self.running):
            return False
        if len(self.running) >= self.jobs:
            return False
        return b.group is None or all(r.group != b.group for r in self.running)

    def next(self):
        with self.lock:
            while self.todo:
                # Alone binaries first: they wait for nothing but an empty machine.
                for b in self.todo:
                    if self.may_start(b):
                        self.todo.remove(b)
                        self.running.append(b)
                        return b
                self.lock.wait()
            return None

    def done(self, b):
        with self.lock:
            self.running.remove(b)
            self.lock.notify_all()
        with self.printed:
            sys.stdout.write(b.report())
            sys.stdout.flush()

    def worker(self):
        while (b := self.next()) is not None:
            b.run()
            self.done(b)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("executables")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--times")
    args = parser.parse_args()
    found = binaries(args.executables)
    last = {}
    if args.times and os.path.exists(args.times):
        with open(args.times, encoding="utf-8") as f:
            last = json.load(f)
    order = sorted(found, key=lambda b: (not b.alone, -last.get(b.name, 0.0), b.name))
    scheduler = Scheduler(order, max(1, args.jobs))
    start = time.monotonic()
    workers = [threading.Thread(target=scheduler.worker) for _ in range(max(1, args.jobs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    retried = retry_alone([b for b in found if not b.ok])
    wall = time.monotonic() - start
    if args.times:
        os.makedirs(os.path.dirname(os.path.abspath(args.times)), exist_ok=True)
        with open(args.times, "w", encoding="utf-8") as f:
            json.dump({b.name: round(b.secs, 1) for b in found}, f, indent=0, sort_keys=True)
    report(found, wall, args.jobs, retried)
    sys.exit(0 if all(b.ok for b in found) else 1)


def retry_alone(failed):
    """Runs each failed binary once more, alone: a test that fails beside others and
    passes alone waits on time the others took (it is named at the end, to be made
    robust); one that fails alone too has failed."""
    passed_alone = []
    for b in failed:
        first = b.output
        b.passed = b.failed = 0
        print(f"\n==== {b.name} failed beside other binaries; run again alone", flush=True)
        b.run()
        sys.stdout.write(b.report())
        sys.stdout.flush()
        if b.ok:
            passed_alone.append(b)
        else:
            b.output = first + b.output
    return passed_alone


def report(found, wall, jobs, retried):
    slowest = sorted(found, key=lambda b: -b.secs)[:15]
    print(f"\n==== the {len(slowest)} slowest of {len(found)} test binaries ({jobs} at once)")
    for b in slowest:
        mark = "" if b.ok else "  (FAILED)"
        print(f"{b.secs:8.1f} s  {b.name}{' (alone)' if b.alone else ''}{mark}")
    print(f"{sum(b.secs for b in found):8.1f} s  all {len(found)} binaries, one after another")
    print(f"{wall:8.1f} s  all {len(found)} binaries, as run")
    for b in retried:
        print(f"PASSED ALONE after failing beside others (to be made robust): {b.name}")
    for b in found:
        if not b.ok:
            print(f"FAILED: {b.name} ({os.path.relpath(b.executable)})")
    passed = sum(b.passed for b in found)
    failed = sum(b.failed for b in found)
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
