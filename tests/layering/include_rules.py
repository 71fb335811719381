#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/DESIGN.md's include rules, checked on the tree (ctest include_rules).

Dependencies point down only: capi/ -> the engine (src/) -> the kernels
(src/ops/); the kernels include only the problem and view headers of src/ and
never, even through another header, the public header; libhwyattn_mpi (mpi/)
and the ggml backend (ggml/) go through the public headers only. Reads the
quoted #includes of every .h/.c/.cc under include/, capi/, src/, mpi/ and
ggml/; prints each broken rule with the file and line; exit 1 if any.

Usage: include_rules.py [repository root]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# What a kernel (src/ops/) may include from src/: the problems and views.
KERNEL_SRC = {"src/sdpa_problem.h", "src/merge_problem.h", "src/kv_cache.h", "src/tensor.h",
              "src/scratch.h", "src/targets.h", "src/cache_line.h", "src/threading.h"}
PUBLIC = {"include/hwyattn.h", "include/hwyattn_mpi.h", "include/hwyattn.hpp"}


def files():
    for top in ("include", "capi", "src", "mpi", "ggml"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if name.endswith((".h", ".c", ".cc")):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, ROOT).replace(os.sep, "/")


def includes(path):
    """(line number, the included file as a repository path, or the raw name
    for a file outside the repository) for each quoted #include."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            if name in ("hwyattn.h", "hwyattn_mpi.h", "hwyattn.hpp"):
                name = "include/" + name
            elif not os.path.exists(os.path.join(ROOT, name)):
                local = os.path.join(os.path.dirname(path), name)
                if os.path.exists(os.path.join(ROOT, local)):
                    name = os.path.normpath(local).replace(os.sep, "/")
            yield number, name


def in_tree(name):
    return name.split("/")[0] in ("include", "capi", "src", "mpi", "ggml")


def broken(path, name):
    """Why `path` may not include `name`, or None."""
    if not in_tree(name):
        return None  # hwy/, ggml's own headers, the C and C++ libraries
    top = path.split("/")[0]
    if top == "include":
        return None if name in PUBLIC else "a public header includes only public headers"
    if top in ("mpi", "ggml"):
        if name in PUBLIC or name.startswith(top + "/"):
            return None
        return "%s/ goes through the public headers only" % top
    if top == "capi":
        return "capi/ never includes a kernel header" if name.startswith("src/ops/") else None
    if path.startswith("src/ops/"):
        if name.startswith("src/ops/") or name in KERNEL_SRC:
            return None
        return "a kernel includes only src/ops/ and %s" % ", ".join(sorted(KERNEL_SRC))
    if name.startswith(("capi/", "mpi/", "ggml/")):
        return "the engine (src/) never includes capi/, mpi/ or ggml/"
    return None


def main():
    graph = {path: list(includes(path)) for path in files()}
    problems = []
    for path, incs in graph.items():
        for number, name in incs:
            why = broken(path, name)
            if why:
                problems.append("%s:%d: includes %s: %s" % (path, number, name, why))
    # No kernel reaches the public header through another header.
    for path in graph:
        if not path.startswith("src/ops/"):
            continue
        seen, stack = {path: None}, [path]
        while stack:
            here = stack.pop()
            for _, name in graph.get(here, []):
                if name in graph and name not in seen:
                    seen[name] = here
                    stack.append(name)
        if "include/hwyattn.h" in seen:
            chain, at = [], "include/hwyattn.h"
            while at is not None:
                chain.append(at)
                at = seen[at]
            problems.append("%s: reaches the public header (%s): no kernel uses its types" %
                            (path, " <- ".join(chain)))
    for p in problems:
        print(p)
    checked = sum(len(v) for v in graph.values())
    print("include_rules: %d files, %d includes, %d broken rules" % (len(graph), checked,
                                                                    len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
