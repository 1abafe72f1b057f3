"""Puts the shared libfsgd (the Makefile's lib/libfsgd.so, built here with
`make shlib` when missing) into the package, so an installed fsgd needs no
checkout. FSGD_LIB names another build of it."""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent.parent


class BuildWithLib(build_py):
    def run(self):
        super().run()
        lib = Path(os.environ.get("FSGD_LIB") or ROOT / "lib" / "libfsgd.so")
        if not os.environ.get("FSGD_LIB"):
            # An sdist unpacked alone has no C sources beside it: say so, not
            # a raw CalledProcessError of make in its parent folder (issue 40
            # item 13).
            if not (ROOT / "Makefile").is_file() or not (ROOT / "trainer").is_dir():
                raise SystemExit(f"fsgd: the C library is built from the fsgd repository, and {ROOT} is not one: "
                                 "pip install ./python from a checkout, or set FSGD_LIB to a built libfsgd.so")
            # up to date or rebuilt: the library must match the checkout
            try:
                subprocess.check_call(["make", "-C", str(ROOT), "shlib"])
            except (OSError, subprocess.CalledProcessError) as e:
                raise SystemExit(f"fsgd: make -C {ROOT} shlib failed ({e}): its output above says why")
        if not lib.is_file():
            raise SystemExit(f"fsgd: {lib} not found (make shlib in the repository)")
        shutil.copy2(lib, Path(self.build_lib) / "fsgd" / "libfsgd.so")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it carries a shared library


setup(cmdclass={"build_py": BuildWithLib}, distclass=BinaryDistribution)
