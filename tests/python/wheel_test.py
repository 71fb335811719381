# SPDX-License-Identifier: Apache-2.0
"""ctest python_wheel: the Python package's build backend, offline and
without compiling anything (python_install, install_test.py, does the CMake
build).

1. The pure-Python wheel (HWYATTN_SKIP_BUILD=1; pip wheel
   --no-build-isolation --no-deps --no-index, offline) is py3-none-any,
   installs into a fresh virtual environment (--system-site-packages, for
   numpy), and from outside the source tree runs a tiny sdpa on the library
   in $HWYATTN_LIBRARY against a float64 softmax(q k^T / sqrt(D)) v written
   out here; its version is the C header's and the loaded library's.
2. A library copied into hwyattn/ by hand is shipped as it is, under its
   name, in a platform-tagged wheel, with no build (the copy's C project is
   a CMakeLists.txt that fails if configured); installed, the package loads
   it with HWYATTN_LIBRARY unset.
3. Without cmake and compilers on PATH, the wheel build stops with one
   message naming them and HWYATTN_SKIP_BUILD.
4. The sdist carries the CMake project under csrc/ (every source file the
   top-level CMakeLists.txt lists; no tests, benchmarks or docs), CMake
   configures it (when cmake is installed), and a wheel builds from it.

    python3 wheel_test.py <repository> <work directory>

Exit status 0 on success, 77 (skipped) without numpy.
"""

import os
import re
import shutil
import subprocess
import sys
import tarfile


def run(*cmd, **kwargs):
    print("$ " + " ".join("'<script>'" if "\n" in c else c for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def header_define(repo, name):
    with open(os.path.join(repo, "include", "hwyattn.h"), encoding="utf-8") as f:
        return re.search(r"^#define HWYATTN_%s +([0-9]+)" % name, f.read(), re.M).group(1)


def header_version(repo):
    """MAJOR.MINOR.PATCH of include/hwyattn.h."""
    return ".".join(header_define(repo, "VERSION_" + p) for p in ("MAJOR", "MINOR", "PATCH"))


# Runs in the virtual environment, from a directory outside the source tree.
CHECK = r"""
import importlib.metadata, os, sys
import numpy as np
import hwyattn

venv = os.path.realpath(sys.prefix)
where = os.path.realpath(hwyattn.__file__)
assert where.startswith(venv + os.sep), "hwyattn imported from %s, not the venv %s" % (where, venv)
assert hwyattn.__version__ == hwyattn.version() == importlib.metadata.version("hwyattn") == sys.argv[1], (
    hwyattn.__version__, hwyattn.version(), importlib.metadata.version("hwyattn"), sys.argv[1])
lib = os.path.realpath(hwyattn.library_path())
if len(sys.argv) > 2:  # the library expected: the package's own, by name
    assert lib == os.path.join(os.path.dirname(where), sys.argv[2]), (lib, where, sys.argv[2])
    assert "HWYATTN_LIBRARY" not in os.environ

rng = np.random.default_rng(7)
q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)   # [B, H, Lq, D]
k = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)   # [B, H, Lk, D]
v = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
out = hwyattn.sdpa(q, k, v)
s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / 2.0  # sqrt(D) = 2
p = np.exp(s - s.max(axis=-1, keepdims=True))
p /= p.sum(axis=-1, keepdims=True)
ref = np.einsum("bhqk,bhkd->bhqd", p, v.astype(np.float64))
err = np.max(np.abs(out - ref)) / np.max(np.abs(ref))
assert out.shape == (1, 2, 3, 4) and out.dtype == np.float32, (out.shape, out.dtype)
assert err < 1e-5, "relative error %g" % err
print("installed hwyattn %s from %s, library %s: sdpa matches float64 (relative error %.2g)"
      % (hwyattn.__version__, where, lib, err))
"""

BACKEND = ("import sys; sys.path.insert(0, sys.argv[1]); import build_backend; "
           "print(getattr(build_backend, sys.argv[2])(sys.argv[3]))")


def one_wheel(directory):
    built = [w for w in os.listdir(directory) if w.endswith(".whl")]
    assert len(built) == 1, built
    return built[0]


def check_sdist(repo, work, version, env):
    """4: the sdist's files, a CMake configure of its csrc/, a wheel from it."""
    dist = os.path.join(work, "sdist")
    os.makedirs(dist)
    name = subprocess.run([sys.executable, "-c", BACKEND, os.path.join(repo, "python"),
                           "build_sdist", dist], env=env, check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout.strip()
    assert name == "hwyattn-%s.tar.gz" % version, name
    path = os.path.join(dist, name)
    with tarfile.open(path) as tar:
        members = [m[len("hwyattn-%s/" % version):] for m in tar.getnames()]
        tar.extractall(dist)
    top = os.path.join(dist, "hwyattn-%s" % version)
    # Every source file of the library's targets, and what CMake reads.
    with open(os.path.join(repo, "CMakeLists.txt"), encoding="utf-8") as f:
        listed = re.findall(r"^\s+((?:capi|src)/[A-Za-z0-9_/.-]+\.cc)\s*$", f.read(), re.M)
    assert len(listed) > 10, listed
    need = ["PKG-INFO", "pyproject.toml", "build_backend.py", "README.md", "hwyattn/__init__.py",
            "csrc/CMakeLists.txt", "csrc/cmake/install.cmake", "csrc/cmake/hwyattn.map",
            "csrc/cmake/hwyattn.pc.in", "csrc/cmake/hwyattnConfig.cmake.in",
            "csrc/include/hwyattn.h", "csrc/ggml/CMakeLists.txt"] + ["csrc/" + s for s in listed]
    missing = [n for n in need if n not in members]
    assert not missing, "the sdist lacks %s" % missing
    extra = [m for m in members if re.match(r"(csrc/)?(tests|bench|docs|examples|rust|go|mpi)/",
                                            m) or m.endswith((".so", ".o", ".whl"))]
    assert not extra, "the sdist should not carry %s" % extra
    print("%s: %d files, %d bytes" % (name, len(members), os.path.getsize(path)), flush=True)
    if shutil.which("cmake"):
        run("cmake", "-S", os.path.join(top, "csrc"), "-B", os.path.join(work, "sdist-cmake"),
            "-DCMAKE_BUILD_TYPE=Release", "-DHWYATTN_BUILD_TESTS=OFF",
            "-DHWYATTN_BUILD_BENCH=OFF", "-DHWYATTN_BUILD_EXAMPLES=OFF", "-DHWYATTN_MPI=OFF",
            env=env, stdout=subprocess.DEVNULL)
    else:
        print("no cmake: the sdist's CMake project is not configured")
    wheels = os.path.join(work, "sdist-wheel")
    skip = dict(env, HWYATTN_SKIP_BUILD="1")
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
        "-w", wheels, top, env=skip)
    assert one_wheel(wheels) == "hwyattn-%s-py3-none-any.whl" % version, one_wheel(wheels)


def main():
    repo, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    try:
        import numpy  # noqa: F401  (the venv sees the system's through --system-site-packages)
    except ImportError:
        print("SKIPPED: %s has no numpy" % sys.executable)
        return 77
    library = os.environ.get("HWYATTN_LIBRARY")
    if not library:
        print("HWYATTN_LIBRARY must name the library to test")
        return 1
    version = header_version(repo)
    soname = "libhwyattn.so.%s" % header_define(repo, "ABI_VERSION")

    shutil.rmtree(work, ignore_errors=True)
    wheels, venv, outside = (os.path.join(work, d) for d in ("wheels", "venv", "run"))
    os.makedirs(outside)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # only the installed package may be imported
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for var in ("HWYATTN_CMAKE_ARGS", "HWYATTN_BUILD_DIR"):
        env.pop(var, None)

    # 1. The pure-Python wheel.
    pure = dict(env, HWYATTN_SKIP_BUILD="1")
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
        "-w", wheels, os.path.join(repo, "python"), env=pure)
    expected = "hwyattn-%s-py3-none-any.whl" % version
    assert one_wheel(wheels) == expected, "built %s, expected %s" % (one_wheel(wheels), expected)
    run(sys.executable, "-m", "venv", "--system-site-packages", venv, env=env)
    python = os.path.join(venv, "bin", "python")
    run(python, "-m", "pip", "install", "--no-index", "--no-deps",
        os.path.join(wheels, expected), env=env)
    run(python, "-c", CHECK, version, cwd=outside, env=env)

    # 2. A library copied into hwyattn/ by hand: shipped as it is, no build.
    copy = os.path.join(work, "copy")
    shutil.copytree(os.path.join(repo, "python"), os.path.join(copy, "python"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so*", "build", "*.egg-info"))
    os.makedirs(os.path.join(copy, "include"))
    shutil.copy(os.path.join(repo, "include", "hwyattn.h"), os.path.join(copy, "include"))
    with open(os.path.join(copy, "CMakeLists.txt"), "w") as f:
        f.write('message(FATAL_ERROR "a library was copied into hwyattn/: no build")\n')
    shutil.copy(os.path.realpath(library), os.path.join(copy, "python", "hwyattn", soname))
    copied = os.path.join(work, "copied-wheel")
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
        "-w", copied, os.path.join(copy, "python"), env=env)
    built = one_wheel(copied)
    assert re.match(r"hwyattn-%s-py3-none-(?!any)\w+\.whl$" % re.escape(version), built), built
    run(python, "-m", "pip", "install", "--no-index", "--no-deps", "--force-reinstall",
        os.path.join(copied, built), env=env)
    no_library = dict(env)
    no_library.pop("HWYATTN_LIBRARY", None)
    run(python, "-c", CHECK, version, soname, cwd=outside, env=no_library)

    # 3. No cmake, no compilers: one message naming them and the way out.
    empty = os.path.join(work, "empty-path")
    os.makedirs(empty)
    bare = dict(env, PATH=empty)
    for var in ("CC", "CXX"):
        bare.pop(var, None)
    p = subprocess.run([sys.executable, "-c", BACKEND, os.path.join(repo, "python"),
                        "build_wheel", os.path.join(work, "never")], env=bare,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(p.stdout.strip())
    assert p.returncode != 0, "built a wheel without cmake"
    for text in ("missing cmake", "C++17 compiler", "HWYATTN_SKIP_BUILD=1"):
        assert text in p.stdout, "no %r in the message" % text
    assert "Traceback" not in p.stdout, "a traceback instead of one message"

    # 4. The sdist.
    check_sdist(repo, work, version, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
