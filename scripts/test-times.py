#!/usr/bin/env python3
"""The slowest test binaries of a `cargo test` run (scripts/test.sh prints it).

    scripts/test-times.py EXECUTABLES LOG [COUNT]

EXECUTABLES: the JSON lines of `cargo test --no-run --message-format=json...` (names each
binary's package and target); LOG: what `cargo test` printed. Prints the COUNT (default 15)
slowest binaries by the time their harness reported, and the sum over all of them.
"""

import json
import os
import re
import sys

RUNNING = re.compile(r"^\s+Running \S+ \((?P<path>[^)]+)\)")
FINISHED = re.compile(r"^test result: (?P<result>\w+)\..*finished in (?P<secs>[0-9.]+)s")


def binary_names(executables_path):
    """Each test executable's file name to `package/target`."""
    names = {}
    with open(executables_path, encoding="utf-8") as lines:
        for line in lines:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            executable = message.get("executable")
            if message.get("reason") != "compiler-artifact" or not executable:
                continue
            package = message.get("package_id", "").split("#")[-1].split("@")[0]
            target = message.get("target", {})
            kind = ",".join(target.get("kind", []))
            names[os.path.basename(executable)] = f"{package} {kind} {target.get('name', '?')}"
    return names


def binary_times(log_path, names):
    """(seconds, name, result) for each binary whose harness reported a result."""
    times, current = [], None
    with open(log_path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            running = RUNNING.match(line)
            if running:
                file_name = os.path.basename(running["path"])
                current = names.get(file_name, file_name)
                continue
            finished = FINISHED.match(line)
            if finished and current:
                times.append((float(finished["secs"]), current, finished["result"]))
                current = None
    return times


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    times = binary_times(sys.argv[2], binary_names(sys.argv[1]))
    times.sort(reverse=True)
    print(f"\n==== the {min(count, len(times))} slowest of {len(times)} test binaries")
    for secs, name, result in times[:count]:
        print(f"{secs:8.1f} s  {name}{'' if result == 'ok' else '  (' + result + ')'}")
    print(f"{sum(t for t, _, _ in times):8.1f} s  all {len(times)} binaries")


if __name__ == "__main__":
    main()
