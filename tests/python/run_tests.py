#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the Python binding's tests: pytest when importable, else unittest.

    python3 tests/python/run_tests.py [--unittest] [-k PATTERN]

Prints one summary line ("40 passed, 0 failed, 1 skipped") and exits 0 when
nothing failed, 1 otherwise, and 77 (ctest's SKIP_RETURN_CODE) when numpy is
not importable. HWYATTN_LIBRARY picks the library under test; PYTHONPATH
should reach the package (run_tests.py also adds <repo>/python itself).
"""

import argparse
import os
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run_pytest(pytest, pattern):
    counts = {"passed": 0, "failed": 0, "skipped": 0}

    class Counter(object):
        def pytest_runtest_logreport(self, report):
            if report.when == "call" or (report.when == "setup" and not report.passed):
                if report.passed:
                    counts["passed"] += 1
                elif report.skipped:
                    counts["skipped"] += 1
                else:
                    counts["failed"] += 1
            elif report.when == "teardown" and report.failed:
                counts["failed"] += 1

    args = [HERE, "-q", "-p", "no:cacheprovider", "-rfEs"]
    if pattern:
        args += ["-k", pattern]
    rc = pytest.main(args, plugins=[Counter()])
    if rc not in (0, 5) and counts["failed"] == 0:  # collection or usage errors
        counts["failed"] += 1
    return counts


def run_unittest(pattern):
    import unittest
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    if pattern:
        def walk(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    yield from walk(t)
                else:
                    yield t
        suite = unittest.TestSuite(t for t in walk(suite) if pattern in t.id())
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    return {"passed": result.testsRun - failed - skipped, "failed": failed, "skipped": skipped}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unittest", action="store_true", help="use unittest even if pytest exists")
    ap.add_argument("-k", dest="pattern", help="only tests whose name contains this")
    args = ap.parse_args()
    sys.dont_write_bytecode = True
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIPPED: numpy is not importable by %s" % sys.executable)
        return SKIP
    sys.path.insert(0, HERE)
    sys.path.insert(1, os.path.join(REPO, "python"))
    import hwyattn
    try:
        where = hwyattn.library_path()
        print("hwyattn %s (%s) from %s; python %s; numpy %s" % (
            hwyattn.version(), hwyattn.simd_target(), where, sys.version.split()[0],
            numpy.__version__))
    except ImportError as e:
        print("FAILED: %s" % e)
        return 1
    pytest = None
    if not args.unittest:
        try:
            import pytest
        except ImportError:
            pytest = None
    if pytest is not None:
        counts = run_pytest(pytest, args.pattern)
        runner = "pytest"
    else:
        counts = run_unittest(args.pattern)
        runner = "unittest"
    print("%d passed, %d failed, %d skipped (%s)" % (counts["passed"], counts["failed"],
                                                    counts["skipped"], runner))
    return 0 if counts["failed"] == 0 and counts["passed"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
