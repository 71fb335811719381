# SPDX-License-Identifier: Apache-2.0
"""A dependency-free PEP 517 / PEP 660 build backend for the hwyattn package.

Why not setuptools: the package is pure Python (ctypes), and `pip install
./python` must work offline on every interpreter, including ones whose
setuptools cannot build a wheel without the separate `wheel` package
(setuptools < 70.1) and that cannot download it. This backend needs only the
standard library, so pip's isolated build environment needs nothing from an
index. It builds:
  - a wheel: the hwyattn/ package (plus a libhwyattn.so* copied into it, which
    makes the wheel platform-specific), and its .dist-info;
  - an sdist: this directory's sources;
  - an editable wheel: a .pth file pointing at this directory.
Metadata comes from pyproject.toml's [project] table, except the version,
which has one home: the C header's HWYATTN_VERSION_MAJOR/MINOR/PATCH
(../include/hwyattn.h in a source checkout; an sdist carries it in PKG-INFO).
"""

import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "hwyattn"


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
    header = os.path.join(_HERE, os.pardir, "include", "hwyattn.h")
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
    """(path in the wheel, path on disk) for the package's files."""
    out = []
    pkg = os.path.join(_HERE, _PACKAGE)
    for name in sorted(os.listdir(pkg)):
        full = os.path.join(pkg, name)
        if not os.path.isfile(full):
            continue
        if name.endswith(".py") or name == "py.typed" or name.startswith("libhwyattn.so"):
            out.append(("%s/%s" % (_PACKAGE, name), full))
    return out


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

    def add(self, arcname, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        info = zipfile.ZipInfo(arcname, date_time=(2024, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
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
    files = _package_files()
    has_lib = any(os.path.basename(f).startswith("libhwyattn.so") for _, f in files)
    tag = "py3-none-" + (_platform_tag() if has_lib else "any")
    w = _Wheel(wheel_directory, name, version, tag)
    for arcname, path in files:
        with open(path, "rb") as f:
            w.add(arcname, f.read())
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


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = "%s-%s" % (name, version)
    path = os.path.join(sdist_directory, base + ".tar.gz")
    sources = ["pyproject.toml", "build_backend.py", "README.md"]
    sources += [os.path.relpath(p, _HERE) for _, p in _package_files()
                if not os.path.basename(p).startswith("libhwyattn")]
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in sources:
            full = os.path.join(_HERE, rel)
            if os.path.exists(full):
                tar.add(full, arcname="%s/%s" % (base, rel), recursive=False)
        data = metadata.encode("utf-8")
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
