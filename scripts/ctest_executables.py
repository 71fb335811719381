#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the build targets whose executables a ctest selection runs.

  scripts/ctest_executables.py [--also name,...] <build dir> [ctest selection...]

e.g. `-R '^capi_test$'` or `-L native`: the names of the build's targets
that appear as a command word (the test's executable, or the emulator's
argument) of a selected test, space-separated, for `cmake --build <dir>
--target ...`: the scripts build only what their runs use (scripts/test.sh's
OpenMP-less build, scripts/cross_test.sh's legs). Several selections:
separate them with `--`. --also adds the named targets that the build has
(e.g. what install rules install, which no test command names).

The commands come from the CTestTestfile.cmake files (ctest itself leaves
out the command of a test whose executable is not built yet).
"""
import os
import re
import subprocess
import sys
from pathlib import Path


def test_commands(build):
    """{test name: [command words]} from the build's CTestTestfile.cmake files."""
    commands = {}
    for path in Path(build).rglob("CTestTestfile.cmake"):
        for name, args in re.findall(r"^add_test\(\[=\[(.*?)\]=\] (.*)\)$", path.read_text(), re.M):
            commands[name] = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
    return commands


def main(argv):
    argv = argv[1:]
    also = []
    if argv[:1] == ["--also"] and len(argv) > 1:
        also = argv[1].split(",")
        argv = argv[2:]
    if not argv:
        sys.exit(__doc__)
    build = os.path.abspath(argv[0])
    selections, current = [], []
    for word in argv[1:]:
        if word == "--":
            selections.append(current)
            current = []
        else:
            current.append(word)
    selections.append(current)
    # The build system's targets (Makefiles: "... name"; Ninja: "name: phony").
    help_text = subprocess.run(["cmake", "--build", build, "--target", "help"], check=True,
                               capture_output=True, text=True).stdout
    targets = {m.group(1) or m.group(2)
               for m in re.finditer(r"^(?:\.\.\. (\S+)|(\S+): \w+)", help_text, re.M)}
    commands = test_commands(build)
    names = {name for name in also if name in targets}
    for selection in selections:
        listing = subprocess.run(["ctest", "--test-dir", build, "-N", *selection], check=True,
                                 capture_output=True, text=True).stdout
        for test in re.findall(r"^\s*Test\s+#\d+: (\S+)$", listing, re.M):
            for word in commands.get(test, []):
                if word.startswith(build + "/") and os.path.basename(word) in targets:
                    names.add(os.path.basename(word))
    print(" ".join(sorted(names)))


if __name__ == "__main__":
    main(sys.argv)
