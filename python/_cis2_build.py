"""The in-tree PEP 517 build backend of the cis2 Python package (stdlib only).

Builds a wheel of python/cis2/. If a built libcis2 is found it is copied into
the wheel next to the package (the wheel then carries a platform tag), so the
installed package needs nothing else; otherwise the wheel is pure Python and
the package looks for an installed libcis2 at import (docs/python.md).

Config settings (pip install --config-settings KEY=VALUE ./python):
  library=PATH   bundle this libcis2.so.N, an absolute path (default:
                 ../build/libcis2.so.N when it exists)
  bundle=0       never bundle a library (a pure wheel); also no/false, and
                 1/yes/true (the default), in any case; other values are refused
"""
import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "cis2")
NAME = "cis2"


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _version():
    return re.search(r'^__version__ = "([^"]+)"', _read(os.path.join(PKG, "__init__.py")), re.M)[1]


def _soname():
    abi = re.search(r"^ABI = (\d+)", _read(os.path.join(PKG, "_lib.py")), re.M)[1]
    return "libcis2.so." + abi


def _metadata():
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {_version()}\n"
        "Summary: Bit-exact CIS-2 LLM inference: Python bindings to libcis2 (ctypes)\n"
        "License: see the cis2 repository\n"
        "Requires-Python: >=3.8\n"
        # numpy only for Model.trace's arrays: an extra (pip install "./python[trace]"), so
        # `pip install ./python` needs nothing but the stdlib, offline (docs/python.md)
        "Provides-Extra: trace\n"
        'Requires-Dist: numpy; extra == "trace"\n'
    )


def _library(settings):
    settings = settings or {}
    bundle = str(settings.get("bundle", "1")).lower()
    if bundle not in ("0", "no", "false", "1", "yes", "true"):
        raise ValueError(f"bundle={settings['bundle']}: expected 0 or 1 (no/yes, false/true)")
    if bundle in ("0", "no", "false"):
        return None
    lib = settings.get("library")
    if lib:
        if not os.path.isabs(lib):  # the hooks run in python/, not where pip was started
            raise ValueError(f"library={lib}: give an absolute path")
        if not os.path.isfile(lib):
            raise FileNotFoundError(f"library={lib}: no such file")
        with open(lib, "rb") as f:
            if f.read(4) != b"\x7fELF":  # bundled as libcis2.so.N, it would fail only at import
                raise ValueError(f"library={lib}: not a shared library (no ELF header)")
        return os.path.realpath(lib)
    built = os.path.join(os.path.dirname(HERE), "build", _soname())
    return os.path.realpath(built) if os.path.isfile(built) else None


class _Wheel:
    def __init__(self, path, tag, purelib):
        self.zf = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []
        self.tag, self.purelib = tag, purelib
        self.info = f"{NAME}-{_version()}.dist-info"

    def add(self, arcname, data, mode=0o644):
        zi = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        zi.external_attr = (0o100000 | mode) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(zi, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self):
        self.add(f"{self.info}/METADATA", _metadata().encode())
        wheel = (
            "Wheel-Version: 1.0\nGenerator: cis2 _cis2_build\n"
            f"Root-Is-Purelib: {'true' if self.purelib else 'false'}\nTag: {self.tag}\n"
        )
        self.add(f"{self.info}/WHEEL", wheel.encode())
        self.add(f"{self.info}/top_level.txt", b"cis2\n")
        rec = "\n".join(self.record + [f"{self.info}/RECORD,,"]) + "\n"
        self.zf.writestr(f"{self.info}/RECORD", rec)
        self.zf.close()


def _platform_tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    lib = _library(config_settings)
    tag = _platform_tag() if lib else "py3-none-any"
    name = f"{NAME}-{_version()}-{tag}.whl"
    w = _Wheel(os.path.join(wheel_directory, name), tag, purelib=lib is None)
    for f in sorted(os.listdir(PKG)):
        if f.endswith(".py"):
            with open(os.path.join(PKG, f), "rb") as fh:
                w.add(f"cis2/{f}", fh.read())
    if lib:
        with open(lib, "rb") as fh:
            w.add(f"cis2/{_soname()}", fh.read(), 0o755)
    w.close()
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a .pth file puts this directory on sys.path (the package then
    finds ../build/libcis2.so.N, the source tree's library)."""
    name = f"{NAME}-{_version()}-py3-none-any.whl"
    w = _Wheel(os.path.join(wheel_directory, name), "py3-none-any", purelib=True)
    w.add("cis2_editable.pth", (HERE + "\n").encode())
    w.close()
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        files = ["pyproject.toml", "_cis2_build.py"]
        files += [os.path.join("cis2", f) for f in sorted(os.listdir(PKG)) if f.endswith(".py")]
        for f in files:
            t.add(os.path.join(HERE, f), arcname=f"{base}/{f}")
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
