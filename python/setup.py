"""Builds the pccl package. Metadata is in pyproject.toml; this file only adds the optional
bundling of the native library: with PCCL_BUNDLE_LIBRARY=/path/to/libpccl.so the library is
copied into the package (found there first at import) and the wheel is tagged for this platform."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

BUNDLE = os.environ.get("PCCL_BUNDLE_LIBRARY")
if BUNDLE and not os.path.isfile(BUNDLE):
    raise SystemExit(f"PCCL_BUNDLE_LIBRARY={BUNDLE}: no such file")


class BuildPy(build_py):
    def run(self):
        super().run()
        if BUNDLE:
            shutil.copyfile(BUNDLE, os.path.join(self.build_lib, "pccl", "libpccl.so"))


class PlatformDistribution(Distribution):
    def has_ext_modules(self):
        return bool(BUNDLE)  # a bundled .so makes the wheel platform-specific


setup(cmdclass={"build_py": BuildPy}, distclass=PlatformDistribution)
