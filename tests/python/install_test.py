# SPDX-License-Identifier: Apache-2.0
"""ctest python_install: `pip install ./python` as a user runs it, library
included.

In a fresh virtual environment (in the work directory, outside the source
tree), `pip install <repository>/python` with HWYATTN_LIBRARY unset: the
build backend (python/build_backend.py) builds libhwyattn with CMake and
ships it in the wheel. Then, from a directory outside the tree, also without
HWYATTN_LIBRARY: import hwyattn, check that the library it loaded is the
package's own (inside the venv's site-packages, named by its SONAME, the
wheel platform-tagged) and run an sdpa against numpy float64. With --sdist,
the same again from the sdist the backend builds (pip install
hwyattn-<v>.tar.gz, a second CMake build from the sdist's csrc/).

    python3 install_test.py <repository> <work directory> [--sdist]

HWYATTN_CMAKE_ARGS, if set, is passed on (tests/python/CMakeLists.txt sets
it so that the build compiles the portable fallback alone: a few minutes on
2 cores instead of ~10); unset, this script uses the same default.

numpy in the venv: the running interpreter's, through
--system-site-packages; if it has none, numpy==NUMPY_PIN from the package
index. Exit status 0 on success, 77 (skipped, saying why) without cmake, a
C/C++ compiler or numpy.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wheel_test import header_version, run  # noqa: E402

SKIP = 77
# What the ctest build compiles: the portable fallback only (scripts/test.sh's
# OpenMP-less and sanitizer builds do the same).
FALLBACK_ONLY = "-DHWYATTN_EXTRA_DISABLED_TARGETS=HWY_SSE4|HWY_AVX2|HWY_AVX3"
# numpy for a venv whose interpreter has none: an exact version with wheels
# for the interpreter.
NUMPY_PIN = "1.26.4" if sys.version_info < (3, 13) else "2.3.5"

# Runs in the virtual environment, from a directory outside the source tree.
CHECK = r"""
import importlib.metadata, os, sys, sysconfig
import numpy as np
import hwyattn

assert "HWYATTN_LIBRARY" not in os.environ
venv = os.path.realpath(sys.prefix)
site = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
where = os.path.realpath(hwyattn.__file__)
assert where.startswith(venv + os.sep), "hwyattn imported from %s, not the venv %s" % (where, venv)
lib = os.path.realpath(hwyattn.library_path())
assert any(lib.startswith(s + os.sep) for s in site), (
    "the library loaded is %s, not the package's own in %s" % (lib, sorted(site)))
assert os.path.dirname(lib) == os.path.dirname(where), (lib, where)
assert os.path.basename(lib) == "libhwyattn.so.%d" % hwyattn.abi_version(), lib  # the SONAME
wheel = importlib.metadata.distribution("hwyattn").read_text("WHEEL")
tag = [l.split(":", 1)[1].strip() for l in wheel.splitlines() if l.startswith("Tag:")]
assert len(tag) == 1 and tag[0].startswith("py3-none-") and not tag[0].endswith("-any"), tag
assert hwyattn.__version__ == importlib.metadata.version("hwyattn") == sys.argv[1], (
    hwyattn.__version__, importlib.metadata.version("hwyattn"), sys.argv[1])

rng = np.random.default_rng(11)
q = rng.standard_normal((2, 4, 5, 16)).astype(np.float32)   # [B, Hq, Lq, D]
k = rng.standard_normal((2, 2, 9, 16)).astype(np.float32)   # [B, Hkv, Lk, D]: GQA
v = rng.standard_normal((2, 2, 9, 8)).astype(np.float32)
out = hwyattn.sdpa(q, k, v, causal="bottom_right")
kh, vh = (np.repeat(x.astype(np.float64), 2, axis=1) for x in (k, v))
s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), kh) / 4.0  # sqrt(D) = 4
s = np.where(np.arange(9)[None, :] <= np.arange(5)[:, None] + 4, s, -np.inf)
p = np.exp(s - s.max(axis=-1, keepdims=True))
p /= p.sum(axis=-1, keepdims=True)
ref = np.einsum("bhqk,bhkd->bhqd", p, vh)
err = np.max(np.abs(out - ref)) / np.max(np.abs(ref))
assert out.shape == (2, 4, 5, 8) and out.dtype == np.float32, (out.shape, out.dtype)
assert err < 1e-5, "relative error %g" % err
print("installed hwyattn %s (%s, %s) from %s: sdpa matches float64 (relative error %.2g)"
      % (hwyattn.__version__, tag[0], hwyattn.simd_target(), lib, err))
"""


def missing_tools():
    """What the CMake build needs and this machine lacks."""
    missing = []
    if shutil.which("cmake") is None:
        missing.append("cmake")
    cxx = os.environ.get("CXX", "").split()
    if not (shutil.which(cxx[0]) if cxx else any(shutil.which(c) for c in ("c++", "g++",
                                                                             "clang++"))):
        missing.append("a C++ compiler")
    cc = os.environ.get("CC", "").split()
    if not (shutil.which(cc[0]) if cc else any(shutil.which(c) for c in ("cc", "gcc", "clang"))):
        missing.append("a C compiler")
    return missing


def timed(what, times, *cmd, **kwargs):
    start = time.time()
    run(*cmd, **kwargs)
    times.append((what, time.time() - start))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sdist = "--sdist" in sys.argv[1:]
    repo, work = os.path.abspath(args[0]), os.path.abspath(args[1])
    missing = missing_tools()
    if missing:
        print("SKIPPED: the build of libhwyattn needs %s" % " and ".join(missing))
        return SKIP
    version = header_version(repo)
    shutil.rmtree(work, ignore_errors=True)
    venv, outside, dist = (os.path.join(work, d) for d in ("venv", "run", "dist"))
    os.makedirs(outside)
    os.makedirs(dist)
    env = dict(os.environ)
    # Only the installed package, and its own library, may be used.
    for var in ("HWYATTN_LIBRARY", "PYTHONPATH", "HWYATTN_SKIP_BUILD", "HWYATTN_BUILD_DIR"):
        env.pop(var, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("HWYATTN_CMAKE_ARGS", FALLBACK_ONLY)
    print("HWYATTN_CMAKE_ARGS=%s" % env["HWYATTN_CMAKE_ARGS"], flush=True)
    times = []

    try:
        import numpy  # noqa: F401
        have_numpy = True
    except ImportError:
        have_numpy = False
    venv_cmd = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if have_numpy else [])
    timed("venv", times, *(venv_cmd + [venv]), env=env)
    python = os.path.join(venv, "bin", "python")
    if not have_numpy:
        try:
            timed("numpy==%s" % NUMPY_PIN, times, python, "-m", "pip", "install",
                  "--only-binary=:all:", "numpy==%s" % NUMPY_PIN, env=env)
        except subprocess.CalledProcessError:
            print("SKIPPED: %s has no numpy and pip could not install numpy==%s (no network?)"
                  % (sys.executable, NUMPY_PIN))
            return SKIP
    # numpy is there: nothing to fetch (the backend has no build requirements).
    # --no-cache-dir: never a wheel pip cached from an earlier run.
    timed("pip install ./python (CMake build)", times, python, "-m", "pip", "install",
          "--no-index", "--no-cache-dir", "-v", os.path.join(repo, "python"), env=env,
          cwd=outside)
    timed("check", times, python, "-c", CHECK, version, cwd=outside, env=env)

    if sdist:
        start = time.time()
        name = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
             "import build_backend; print(build_backend.build_sdist(sys.argv[2]))",
             os.path.join(repo, "python"), dist],
            env=env, check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
        times.append(("build_sdist", time.time() - start))
        path = os.path.join(dist, name)
        with tarfile.open(path) as tar:
            members = tar.getnames()
        print("%s: %d files, %d bytes" % (name, len(members), os.path.getsize(path)))
        timed("pip uninstall", times, python, "-m", "pip", "uninstall", "-y", "hwyattn",
              env=env, cwd=outside)
        timed("pip install the sdist (CMake build)", times, python, "-m", "pip", "install",
              "--no-index", "--no-cache-dir", "-v", path, env=env, cwd=outside)
        timed("check", times, python, "-c", CHECK, version, cwd=outside, env=env)

    print("times: " + ", ".join("%s %.0f s" % t for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
