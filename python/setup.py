"""Puts the shared libfsgd into the package, so an installed fsgd needs no
checkout. The library is built with `make shlib` from the C sources: the
fsgd repository around python/ (pip install ./python), or csrc/, the copy
of them an sdist carries (pip install fsgd-VERSION.tar.gz: no repository
needed). FSGD_LIB names a built libfsgd.so instead."""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent
BUNDLED = HERE / "csrc"
# What `make shlib` compiles: the Makefile and the sources of these folders
# (not data/sets, the data sets, nor tests/)
C_DIRS = ("common", "codec", "data", "strategy", "trainer")
C_SUFFIXES = (".c", ".h", ".cu")
# Debian's names of what the library links (the repository's scripts/install-deps.sh)
NEEDS = ("gcc make pkg-config librdkafka-dev liblz4-dev libyaml-dev libopenblas-dev liblapacke-dev "
         "libmicrohttpd-dev libjansson-dev libsodium-dev zlib1g-dev libzstd-dev")


def c_tree():
    """The folder holding the C sources: an sdist's csrc/ first (it builds what
    it carries), else the repository around python/; None when neither."""
    for root in (BUNDLED, CHECKOUT):
        if (root / "Makefile").is_file() and (root / "trainer").is_dir():
            return root
    return None


def c_sources(root):
    yield "Makefile"
    for d in C_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.suffix in C_SUFFIXES and p.is_file():
                yield str(p.relative_to(root))


class SdistWithSources(sdist):
    """The sdist carries the C sources under csrc/, so it builds alone."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = c_tree()
        if root is None:
            raise SystemExit(f"fsgd: no C sources to put into the sdist: {CHECKOUT} is no fsgd repository")
        for rel in c_sources(root):
            dst = Path(base_dir) / "csrc" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dst)


class BuildWithLib(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("FSGD_LIB")
        if not lib:
            root = c_tree()
            # say what is missing, not a raw CalledProcessError of make in the
            # parent folder (issue 40 item 13)
            if root is None:
                raise SystemExit(f"fsgd: the C library is built from the fsgd repository or an fsgd sdist, and "
                                 f"{HERE} is in neither (no csrc/, and {CHECKOUT} is not one): pip install "
                                 "./python from a checkout, pip install the sdist, or set FSGD_LIB to a built "
                                 "libfsgd.so")
            cmd = ["make", "-C", str(root), f"-j{min(os.cpu_count() or 1, 8)}", "shlib"]
            if root == BUNDLED:
                cmd.append("CUDA=0")  # the CUDA plugin is built from a checkout (docs/install.md)
            # an outer make's settings (make asan's BUILD=build-asan, MAKEFLAGS)
            # would put the library elsewhere: this build is the package's own
            env = {k: v for k, v in os.environ.items() if k not in OUTER_MAKE}
            try:
                subprocess.check_call(cmd, env=env)  # up to date or rebuilt: the library matches the sources
            except (OSError, subprocess.CalledProcessError) as e:
                raise SystemExit(f"fsgd: building the C library failed ({' '.join(cmd)}: {e}); its output above "
                                 f"says why. It needs a C compiler, make and the development files of the "
                                 f"libraries it links (Debian: apt-get install {NEEDS})")
            lib = root / "lib" / "libfsgd.so"
        if not Path(lib).is_file():
            raise SystemExit(f"fsgd: {lib} not found (make shlib in the repository)")
        shutil.copy2(lib, Path(self.build_lib) / "fsgd" / "libfsgd.so")


# Variables of an outer make that the library's build must not inherit.
OUTER_MAKE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "BUILD", "BIN", "OPT", "SAN", "WERROR")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it carries a shared library


try:  # setuptools >= 70.1 has it; before, the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None
commands = {"build_py": BuildWithLib, "sdist": SdistWithSources}
if bdist_wheel is not None:

    class AnyPython3Wheel(bdist_wheel):
        """py3-none-PLATFORM: the package loads libfsgd with ctypes and uses no
        CPython ABI, so one wheel fits every Python 3 of its platform
        (auditwheel repair then bundles the libraries: docs/python.md)."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = AnyPython3Wheel

setup(cmdclass=commands, distclass=BinaryDistribution)
