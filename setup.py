"""Build hook: ship the repository's ``patches/``, ``runners/`` and ``recipes/`` inside the wheel
as ``bisectbot/_shipped/<kind>/`` (read through importlib.resources, see bisectbot/shipped.py).
Everything else is declared in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("patches", "runners", "recipes")
ROOT = Path(__file__).resolve().parent


class BuildPyWithShippedData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout's directories
            return
        for kind in SHIPPED:
            src = ROOT / kind
            if not src.is_dir():
                continue
            dest = Path(self.build_lib) / "bisectbot" / "_shipped" / kind
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildPyWithShippedData})
