# SPDX-License-Identifier: Apache-2.0
"""A dependency-free PEP 517 / PEP 660 build backend for the hwyattn package.

Why not setuptools or scikit-build: the Python layer is pure Python (ctypes
over libhwyattn), and `pip install ./python` must work offline on every
interpreter, including ones whose setuptools cannot build a wheel without
the separate `wheel` package (setuptools < 70.1) and that cannot download
it. This backend needs only the standard library, so pip's isolated build
environment needs nothing from an index. It builds:
  - a wheel: the hwyattn/ package and its .dist-info, plus the shared
    library, which makes the wheel platform-specific (py3-none-<platform>):
      1. a libhwyattn.so* copied into hwyattn/ by hand is shipped as it is
         (no build);
      2. else, from a source tree (the checkout around this directory, or
         an sdist's csrc/), libhwyattn is built with CMake and its real file
         shipped under its SONAME (hwyattn/libhwyattn.so.1), found there
         first at run time (hwyattn/_capi.py):
           cmake -S <root> -B <dir> -DCMAKE_BUILD_TYPE=Release
                 -DHWYATTN_BUILD_TESTS=OFF -DHWYATTN_BUILD_BENCH=OFF
                 -DHWYATTN_BUILD_EXAMPLES=OFF -DHWYATTN_MPI=OFF $HWYATTN_CMAKE_ARGS
           cmake --build <dir> --target hwyattn -j$HWYATTN_BUILD_JOBS
         CMake's output goes to stderr (pip shows it with -v). The build
         needs what the library does (CMake >= 3.25, a C++17 compiler,
         Highway, OpenMP unless -DHWYATTN_OPENMP=OFF); a missing cmake or
         compiler stops it with a message naming it. The library links the
         machine's libhwy and OpenMP runtime: the wheel is for this machine
         (or one with the same packages), not a manylinux wheel;
      3. else (HWYATTN_SKIP_BUILD=1, or no source tree) the pure-Python
         package, which loads a libhwyattn found at run time
         ($HWYATTN_LIBRARY, a build*/ directory of a checkout, the system).
  - an sdist: this directory's sources and, under csrc/, what the CMake
    build of the library needs (CMakeLists.txt, cmake/, include/, capi/,
    src/, ggml/CMakeLists.txt), so that installing the sdist builds too;
  - an editable wheel: a .pth file pointing at this directory (no build:
    the package finds the newest build*/libhwyattn.so of the checkout).
Environment (wheel builds only):
  HWYATTN_SKIP_BUILD=1   no CMake build: the pure-Python wheel (py3-none-any)
  HWYATTN_CMAKE_ARGS     more CMake arguments (shell words), e.g.
                         "-DHWYATTN_OPENMP=OFF" or
                         "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  HWYATTN_BUILD_JOBS     parallel compile jobs (default: os.cpu_count())
  HWYATTN_BUILD_DIR      the CMake build directory, kept and reused by the
                         next build, CMake cache included (default: a
                         temporary one, removed after a successful build)
Metadata comes from pyproject.toml's [project] table, except the version,
which has one home: the C header's HWYATTN_VERSION_MAJOR/MINOR/PATCH
(../include/hwyattn.h in a source checkout, csrc/include/hwyattn.h in an
sdist, which also carries it in PKG-INFO).
"""

import base64
import hashlib
import io
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "hwyattn"
# Where an sdist keeps the C project (the checkout's root, in part).
_CSRC = "csrc"
# What the CMake build of libhwyattn needs, relative to the project root:
# (directory, file name suffixes, recursive). The top-level CMakeLists.txt
# add_subdirectory's ggml/ and includes cmake/install.cmake unconditionally;
# tests, benchmarks, examples, MPI and the bindings are off in the wheel's
# build and stay out of the sdist.
_CSRC_FILES = [
    ("", ("CMakeLists.txt", "LICENSE", "NOTICE"), False),
    ("cmake", (".cmake", ".in", ".map"), False),
    ("include", (".h", ".hpp"), False),
    ("capi", (".cc", ".h"), False),
    ("src", (".cc", ".h"), True),
    ("ggml", ("CMakeLists.txt",), False),
]
_SKIP_VALUES = ("", "0", "false", "no", "off")


def _source_root():
    """The C project to build libhwyattn from: an sdist's csrc/, else the
    checkout around this directory; None when neither has the sources."""
    for root in (os.path.join(_HERE, _CSRC), os.path.join(_HERE, os.pardir)):
        if (os.path.isfile(os.path.join(root, "CMakeLists.txt")) and
                os.path.isfile(os.path.join(root, "include", "hwyattn.h"))):
            return os.path.normpath(root)
    return None


def _read_project():
    with open(os.path.join(_HERE, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(data.decode("utf-8"))["project"]
    except ImportError:
        pass
    # Fallback for Python < 3.11: the few simple keys this file uses.
    text = data.decode("utf-8")
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    project = {}
    for key in ("name", "description", "requires-python", "readme"):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), section, re.M)
        if m:
            project[key] = m.group(1)
    m = re.search(r"^dependencies\s*=\s*\[(.*?)\]", section, re.M | re.S)
    project["dependencies"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    m = re.search(r"^classifiers\s*=\s*\[(.*?)\]", section, re.M | re.S)
    project["classifiers"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    m = re.search(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]*)"', section, re.M)
    if m:
        project["license"] = {"text": m.group(1)}
    return project


def _version():
    """MAJOR.MINOR.PATCH from include/hwyattn.h, or from an sdist's PKG-INFO."""
    root = _source_root()
    header = os.path.join(root or os.path.join(_HERE, os.pardir), "include", "hwyattn.h")
    if os.path.exists(header):
        with open(header, encoding="utf-8") as f:
            text = f.read()
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            m = re.search(r"^#define HWYATTN_VERSION_%s +([0-9]+)" % part, text, re.M)
            if not m:
                raise RuntimeError("%s defines no HWYATTN_VERSION_%s" % (header, part))
            parts.append(m.group(1))
        return ".".join(parts)
    pkg_info = os.path.join(_HERE, "PKG-INFO")
    if os.path.exists(pkg_info):
        with open(pkg_info, encoding="utf-8") as f:
            m = re.search(r"^Version: *(\S+)", f.read(), re.M)
        if m:
            return m.group(1)
    raise RuntimeError("the version comes from %s (or an sdist's PKG-INFO); neither exists"
                       % os.path.normpath(header))


def _metadata():
    p = _read_project()
    version = _version()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % version]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("license", {}).get("text"):
        lines.append("License: %s" % p["license"]["text"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    for c in p.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    for d in p.get("dependencies", []):
        lines.append("Requires-Dist: %s" % d)
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str) and os.path.exists(os.path.join(_HERE, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_HERE, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return p["name"], version, "\n".join(lines) + "\n" + body


def _package_files():
    """(path in the wheel, path on disk) for the package's files (with a
    libhwyattn.so* copied into hwyattn/ by hand)."""
    out = []
    pkg = os.path.join(_HERE, _PACKAGE)
    for name in sorted(os.listdir(pkg)):
        full = os.path.join(pkg, name)
        if not os.path.isfile(full):
            continue
        if name.endswith(".py") or name == "py.typed" or name.startswith("libhwyattn.so"):
            out.append(("%s/%s" % (_PACKAGE, name), full))
    return out


def _is_library(path):
    return os.path.basename(path).startswith("libhwyattn.so")


# --------------------------------------------------------------------------
# Building libhwyattn with CMake
# --------------------------------------------------------------------------

def _log(message):
    sys.stderr.write("hwyattn: %s\n" % message)
    sys.stderr.flush()


def _fail(message):
    """Stops the build with one message (no traceback): pip prints it."""
    raise SystemExit("\nhwyattn: %s\n" % message)


def _run(cmd, cwd=None):
    """Runs cmd with its output on stderr (pip shows it with -v, and on a
    failure); returns its exit status."""
    _log("$ " + " ".join(shlex.quote(c) for c in cmd))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        out = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        out = None  # stderr is not a file (a test harness): copy the output
    if out is not None:
        rc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=out).returncode
    else:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sys.stderr.write(p.stdout.decode("utf-8", "replace"))
        rc = p.returncode
    return rc


def _compiler(env_var, names):
    """The compiler CMake will use for a language: $CC / $CXX, or the first
    of names on PATH; None if there is none."""
    given = os.environ.get(env_var, "").strip()
    if given:
        words = shlex.split(given)
        return shutil.which(words[0]) if words else None
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def _check_tools(cmake_args):
    """Stops with one message naming what is missing (cmake, a C++ or C
    compiler) and how to skip the build."""
    missing = []
    if shutil.which("cmake") is None:
        missing.append("cmake (>= 3.25) on PATH")
    chosen = " ".join(cmake_args)
    if "CMAKE_TOOLCHAIN_FILE" not in chosen:
        if "CMAKE_CXX_COMPILER=" not in chosen and \
                _compiler("CXX", ("c++", "g++", "clang++")) is None:
            missing.append("a C++17 compiler ($CXX, or c++ / g++ / clang++ on PATH)")
        if "CMAKE_C_COMPILER=" not in chosen and _compiler("CC", ("cc", "gcc", "clang")) is None:
            missing.append("a C compiler ($CC, or cc / gcc / clang on PATH)")
    if missing:
        _fail("cannot build libhwyattn, the shared library this package loads: missing %s. "
              "Install them (Debian: apt-get install cmake g++ libhwy-dev), or set "
              "HWYATTN_SKIP_BUILD=1 to build the pure-Python package without the library "
              "(it then loads the libhwyattn.so named by HWYATTN_LIBRARY at run time)."
              % " and ".join(missing))


def _elf_soname(path):
    """DT_SONAME of an ELF shared object, or None (not ELF, none set)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF":
        return None
    wide = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    try:
        if wide:
            shoff, = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        else:
            shoff, = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)

        def section(i):
            at = shoff + i * shentsize
            if wide:  # sh_type, sh_offset, sh_size, sh_link
                sh_type, = struct.unpack_from(end + "I", data, at + 4)
                off, size = struct.unpack_from(end + "QQ", data, at + 24)
                link, = struct.unpack_from(end + "I", data, at + 40)
            else:
                sh_type, = struct.unpack_from(end + "I", data, at + 4)
                off, size, link = struct.unpack_from(end + "III", data, at + 16)
            return sh_type, off, size, link

        for i in range(shnum):
            sh_type, off, size, link = section(i)
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            _, str_off, str_size, _ = section(link)
            fmt, step = (end + "qQ", 16) if wide else (end + "iI", 8)
            for at in range(off, off + size, step):
                tag, value = struct.unpack_from(fmt, data, at)
                if tag == 0:  # DT_NULL
                    break
                if tag == 14:  # DT_SONAME
                    name = data[str_off + value:data.index(b"\0", str_off + value)]
                    return name.decode("utf-8")
    except (struct.error, ValueError, IndexError):
        return None
    return None


def _built_library(build_dir):
    """(name in the wheel, path) of the library just built: its real file
    (not a symlink) under its SONAME, the name the loader and _capi.py
    look for (libhwyattn.so.1)."""
    candidates = [os.path.join(build_dir, n) for n in sorted(os.listdir(build_dir))
                  if n.startswith("libhwyattn.so")]
    real = sorted({os.path.realpath(p) for p in candidates if os.path.isfile(p)})
    if len(real) != 1:
        _fail("the CMake build left %s in %s; expected one libhwyattn.so* file"
              % (real or "no libhwyattn.so*", build_dir))
    soname = _elf_soname(real[0])
    if not soname:
        # Not ELF (or no DT_SONAME): CMake's SOVERSION link names it.
        links = [os.path.basename(p) for p in candidates if os.path.islink(p)]
        versioned = [n for n in links if re.match(r"^libhwyattn\.so\.[0-9]+$", n)]
        soname = versioned[0] if versioned else os.path.basename(real[0])
    return soname, real[0]


def _build_library():
    """Builds libhwyattn with CMake; returns (name in the wheel, data)."""
    root = _source_root()
    cmake_args = shlex.split(os.environ.get("HWYATTN_CMAKE_ARGS", ""))
    _check_tools(cmake_args)
    jobs = os.environ.get("HWYATTN_BUILD_JOBS", "").strip() or str(os.cpu_count() or 1)
    if not jobs.isdigit() or int(jobs) < 1:
        _fail("HWYATTN_BUILD_JOBS is %r; must be a positive number of jobs" % jobs)
    kept = os.environ.get("HWYATTN_BUILD_DIR", "").strip()
    build_dir = os.path.abspath(kept) if kept else tempfile.mkdtemp(prefix="hwyattn-cmake-")
    _log("building libhwyattn from %s in %s with CMake (-j%s%s; HWYATTN_SKIP_BUILD=1 skips "
         "this)" % (root, build_dir, jobs,
                    "; HWYATTN_CMAKE_ARGS=%s" % " ".join(shlex.quote(a) for a in cmake_args)
                    if cmake_args else ""))
    start = time.time()
    ok = False
    try:
        configure = ["cmake", "-S", root, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                     "-DHWYATTN_BUILD_TESTS=OFF", "-DHWYATTN_BUILD_BENCH=OFF",
                     "-DHWYATTN_BUILD_EXAMPLES=OFF", "-DHWYATTN_MPI=OFF"] + cmake_args
        if _run(configure) != 0:
            _fail("configuring libhwyattn with CMake failed (CMake's messages are above). "
                  "It needs CMake >= 3.25, a C++17 compiler, Highway "
                  "(Debian: libhwy-dev) and OpenMP (or HWYATTN_CMAKE_ARGS=-DHWYATTN_OPENMP=OFF); "
                  "HWYATTN_SKIP_BUILD=1 builds the pure-Python package instead.")
        if _run(["cmake", "--build", build_dir, "--target", "hwyattn", "-j" + jobs]) != 0:
            _fail("building libhwyattn failed (the compiler's messages are above); "
                  "HWYATTN_SKIP_BUILD=1 builds the pure-Python package instead.")
        name, path = _built_library(build_dir)
        with open(path, "rb") as f:
            data = f.read()
        ok = True
    finally:
        if not kept:
            if ok:
                shutil.rmtree(build_dir, ignore_errors=True)
            else:
                _log("the failed build is left in %s" % build_dir)
    _log("built %s (%d bytes) in %.0f s" % (name, len(data), time.time() - start))
    return name, data


def _skip_build():
    return os.environ.get("HWYATTN_SKIP_BUILD", "").strip().lower() not in _SKIP_VALUES


def _platform_tag():
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


class _Wheel(object):
    def __init__(self, directory, name, version, tag):
        self.dist_info = "%s-%s.dist-info" % (name, version)
        self.filename = "%s-%s-%s.whl" % (name, version, tag)
        self.path = os.path.join(directory, self.filename)
        self.tag = tag
        self.records = []
        self.zip = zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED)

    def add(self, arcname, data, mode=0o644):
        if isinstance(data, str):
            data = data.encode("utf-8")
        info = zipfile.ZipInfo(arcname, date_time=(2024, 1, 1, 0, 0, 0))
        info.external_attr = mode << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def finish(self, metadata):
        pure = self.tag.endswith("-any")
        self.add(self.dist_info + "/METADATA", metadata)
        self.add(self.dist_info + "/WHEEL",
                 "Wheel-Version: 1.0\nGenerator: hwyattn build_backend\nRoot-Is-Purelib: %s\n"
                 "Tag: %s\n" % ("true" if pure else "false", self.tag))
        self.add(self.dist_info + "/top_level.txt", _PACKAGE + "\n")
        record = self.dist_info + "/RECORD"
        self.records.append(record + ",,")
        info = zipfile.ZipInfo(record, date_time=(2024, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, "\n".join(self.records) + "\n")
        self.zip.close()
        return self.filename


# --------------------------------------------------------------------------
# PEP 517 hooks
# --------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, metadata = _metadata()
    files = []  # (name in the wheel, bytes)
    for arcname, path in _package_files():
        with open(path, "rb") as f:
            files.append((arcname, f.read()))
    has_lib = any(_is_library(arcname) for arcname, _ in files)
    if has_lib:
        _log("shipping the libhwyattn.so* copied into %s (no build)"
             % os.path.join(_HERE, _PACKAGE))
    elif _skip_build():
        _log("HWYATTN_SKIP_BUILD is set: the pure-Python package, without libhwyattn")
    elif _source_root() is None:
        _log("no C sources (../CMakeLists.txt, csrc/) next to %s: the pure-Python package, "
             "without libhwyattn (set HWYATTN_LIBRARY at run time)" % _HERE)
    else:
        lib_name, data = _build_library()
        files.append(("%s/%s" % (_PACKAGE, lib_name), data))
        has_lib = True
    tag = "py3-none-" + (_platform_tag() if has_lib else "any")
    w = _Wheel(wheel_directory, name, version, tag)
    for arcname, data in files:
        w.add(arcname, data, 0o755 if _is_library(arcname) else 0o644)
    return w.finish(metadata)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, metadata = _metadata()
    w = _Wheel(wheel_directory, name, version, "py3-none-any")
    w.add("__editable__.%s.pth" % name, _HERE + "\n")
    return w.finish(metadata)


def _prepare_metadata(metadata_directory):
    name, version, metadata = _metadata()
    dist_info = os.path.join(metadata_directory, "%s-%s.dist-info" % (name, version))
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata)
    return os.path.basename(dist_info)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _prepare_metadata(metadata_directory)


def _csrc_files(root):
    """Paths, relative to the C project's root, of what its CMake build of
    libhwyattn needs (_CSRC_FILES)."""
    out = []
    for directory, suffixes, recursive in _CSRC_FILES:
        top = os.path.join(root, directory)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if recursive else []
            for f in sorted(filenames):
                if f.startswith(".") or not f.endswith(suffixes):
                    continue
                if directory == "" and f not in suffixes:
                    continue
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = "%s-%s" % (name, version)
    path = os.path.join(sdist_directory, base + ".tar.gz")
    sources = [(rel, os.path.join(_HERE, rel))
               for rel in ["pyproject.toml", "build_backend.py", "README.md"]]
    sources += [(os.path.relpath(p, _HERE), p) for _, p in _package_files()
                if not _is_library(p)]
    root = _source_root()
    if root is not None:
        sources += [("%s/%s" % (_CSRC, rel.replace(os.sep, "/")), os.path.join(root, rel))
                    for rel in _csrc_files(root)]

    def owner(info):  # the same archive for anyone who builds it
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel, full in sources:
            if os.path.exists(full):
                tar.add(full, arcname="%s/%s" % (base, rel), recursive=False, filter=owner)
        data = metadata.encode("utf-8")
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
