"""A PEP 517 build backend in the standard library alone (these machines reach no
package index, and pip's setuptools lacks bdist_wheel): a pure-Python wheel of the
smartt package, and an sdist."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, VERSION = "smartt", "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METADATA = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Python client of the smarttd API (standard library only)\n"
            "License: Apache-2.0\nRequires-Python: >=3.9\n" % (NAME, VERSION))
WHEEL = "Wheel-Version: 1.0\nGenerator: smartt-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            yield "%s/%s" % (NAME, f), os.path.join(pkg, f)


def _record_line(arc, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, h, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "%s-%s.dist-info" % (NAME, VERSION))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(METADATA)
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(WHEEL)
    return os.path.basename(d)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    di = "%s-%s.dist-info" % (NAME, VERSION)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        entries = [(arc, open(p, "rb").read()) for arc, p in _files()]
        entries += [(di + "/METADATA", METADATA.encode()), (di + "/WHEEL", WHEEL.encode())]
        for arc, data in entries:
            z.writestr(arc, data)
            record.append(_record_line(arc, data))
        record.append(di + "/RECORD,,")
        z.writestr(di + "/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/backend.py"] + [a for a, _ in _files()]:
            t.add(os.path.join(HERE, rel), arcname="%s/%s" % (base, rel))
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
