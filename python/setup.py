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
            # up to date or rebuilt: the library must match the checkout
            subprocess.check_call(["make", "-C", str(ROOT), "shlib"])
        if not lib.is_file():
            raise SystemExit(f"fsgd: {lib} not found (make shlib in the repository)")
        shutil.copy2(lib, Path(self.build_lib) / "fsgd" / "libfsgd.so")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it carries a shared library


setup(cmdclass={"build_py": BuildWithLib}, distclass=BinaryDistribution)
