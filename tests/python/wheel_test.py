# SPDX-License-Identifier: Apache-2.0
"""ctest python_wheel: the Python package as a user installs it.

Builds the wheel from python/ (its own build backend: pip wheel
--no-build-isolation --no-deps --no-index, offline), installs it into a fresh
virtual environment (--system-site-packages, for numpy), and from outside the
source tree imports the installed package and runs a tiny sdpa on the library
in $HWYATTN_LIBRARY, against a float64 softmax(q k^T / sqrt(D)) v written out
here. Also checks that the wheel's version is the C header's and the loaded
library's (hwyattn.__version__).

    python3 wheel_test.py <repository> <work directory>

Exit status 0 on success, 77 (skipped) without numpy.
"""

import os
import re
import shutil
import subprocess
import sys


def run(*cmd, **kwargs):
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


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
print("installed hwyattn %s from %s: sdpa matches float64 (relative error %.2g)"
      % (hwyattn.__version__, where, err))
"""


def main():
    repo, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    try:
        import numpy  # noqa: F401  (the venv sees the system's through --system-site-packages)
    except ImportError:
        print("SKIPPED: %s has no numpy" % sys.executable)
        return 77
    if not os.environ.get("HWYATTN_LIBRARY"):
        print("HWYATTN_LIBRARY must name the library to test")
        return 1
    with open(os.path.join(repo, "include", "hwyattn.h"), encoding="utf-8") as f:
        header = f.read()
    version = ".".join(re.search(r"^#define HWYATTN_VERSION_%s +([0-9]+)" % part, header, re.M)
                       .group(1) for part in ("MAJOR", "MINOR", "PATCH"))

    shutil.rmtree(work, ignore_errors=True)
    wheels, venv, outside = (os.path.join(work, d) for d in ("wheels", "venv", "run"))
    os.makedirs(outside)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # only the installed package may be imported
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
        "-w", wheels, os.path.join(repo, "python"), env=env)
    built = [w for w in os.listdir(wheels) if w.endswith(".whl")]
    assert len(built) == 1, built
    expected = "hwyattn-%s-py3-none-any.whl" % version
    assert built[0] == expected, "built %s, expected %s" % (built[0], expected)

    run(sys.executable, "-m", "venv", "--system-site-packages", venv, env=env)
    python = os.path.join(venv, "bin", "python")
    run(python, "-m", "pip", "install", "--no-index", "--no-deps",
        os.path.join(wheels, built[0]), env=env)
    run(python, "-c", CHECK, version, cwd=outside, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
