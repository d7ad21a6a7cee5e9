"""A PEP 517 build backend for the rolloutmesh client that needs nothing.

The package is pure Python, so building a wheel is only zipping the files with
the metadata of pyproject.toml. Doing it here (instead of with setuptools)
means `pip install ./clients/python` works offline, without
`--no-build-isolation`: pip's isolated build environment has nothing to
download because ``build-system.requires`` is empty.

Supported hooks: build_wheel, build_sdist, build_editable (a .pth file that
points at this directory), and the get_requires_* hooks (all empty).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "rolloutmesh"
# Fixed timestamps make the wheel reproducible (zip cannot store times before 1980).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _project():
    """Reads [project] of pyproject.toml: name, version, requires-python,
    dependencies, description (tomllib when present, else a small parser
    good enough for this file)."""
    path = os.path.join(HERE, "pyproject.toml")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python 3.11+

        return tomllib.loads(raw.decode("utf-8"))["project"]
    except ImportError:
        pass
    text = raw.decode("utf-8")
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    proj = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), section, re.M)
        if m:
            proj[key] = m.group(1)
    m = re.search(r"^dependencies\s*=\s*\[(.*?)\]", section, re.M | re.S)
    proj["dependencies"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    m = re.search(r"^\[project\.optional-dependencies\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if m:
        proj["optional-dependencies"] = {
            k: re.findall(r'"([^"]+)"', v) for k, v in re.findall(r"^(\w[\w-]*)\s*=\s*\[(.*?)\]", m.group(1), re.M | re.S)
        }
    return proj


def _dist_name(proj):
    return re.sub(r"[-_.]+", "_", proj["name"]).lower()


def _metadata(proj):
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % proj["name"],
        "Version: %s" % proj["version"],
    ]
    if proj.get("description"):
        lines.append("Summary: %s" % proj["description"])
    if proj.get("requires-python"):
        lines.append("Requires-Python: %s" % proj["requires-python"])
    for dep in proj.get("dependencies", []):
        lines.append("Requires-Dist: %s" % dep)
    for extra, deps in sorted(proj.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: %s" % extra)
        for dep in deps:
            lines.append('Requires-Dist: %s ; extra == "%s"' % (dep, extra))
    readme = os.path.join(HERE, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
        return "\n".join(lines) + "\n\n" + body
    return "\n".join(lines) + "\n"


def _package_files():
    """The package's .py files (generated stubs included), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(HERE, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(dirpath, name)
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, files):
    """files: list of (arcname, bytes), dist-info excluded. Returns the name."""
    proj = _project()
    dist = _dist_name(proj)
    info = "%s-%s.dist-info" % (dist, proj["version"])
    wheel_name = "%s-%s-py3-none-any.whl" % (dist, proj["version"])
    meta = [
        (info + "/METADATA", _metadata(proj).encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: rolloutmesh _build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    entries = list(files) + meta
    record = "\n".join(_record_line(a, d) for a, d in entries) + "\n%s/RECORD,,\n" % info
    entries.append((info + "/RECORD", record.encode()))
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in entries:
            zi = zipfile.ZipInfo(arcname, ZIP_TIME)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    return wheel_name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for arcname, full in _package_files():
        with open(full, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = "_%s_editable.pth" % PACKAGE
    return _write_wheel(wheel_directory, [(pth, (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    proj = _project()
    base = "%s-%s" % (_dist_name(proj), proj["version"])
    names = ["pyproject.toml", "_build_backend.py", "README.md"] + [a for a, _ in _package_files()]
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name in names:
            full = os.path.join(HERE, name)
            if not os.path.exists(full):
                continue
            with open(full, "rb") as f:
                data = f.read()
            ti = tarfile.TarInfo("%s/%s" % (base, name))
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tf.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata(proj).encode("utf-8")
        ti = tarfile.TarInfo("%s/PKG-INFO" % base)
        ti.size, ti.mode, ti.mtime = len(pkg_info), 0o644, 0
        tf.addfile(ti, io.BytesIO(pkg_info))
    return base + ".tar.gz"
