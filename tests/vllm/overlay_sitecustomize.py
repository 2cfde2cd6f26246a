"""Put this directory's ``vllm/**.py`` files first: an overlay of vLLM's Python code (issue 22).

Copied as ``sitecustomize.py`` into an overlay directory that holds only the changed files of
vLLM (e.g. ``vllm/v1/attention/backends/cpu_attn.py``); with the directory on ``PYTHONPATH``
every Python process of the server (the API server and its engine-core children, which inherit
the environment) imports those modules from here and everything else from the installed package.
Used by the real-vLLM lane's planted bug and its overlay git history (tests/vllm/).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.abspath(__file__))


class _OverlayFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 - the import protocol
        if not fullname.startswith("vllm."):
            return None
        rel = os.path.join(_ROOT, *fullname.split("."))
        if os.path.isfile(rel + ".py"):
            return importlib.util.spec_from_file_location(fullname, rel + ".py")
        return None


if not any(isinstance(f, _OverlayFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _OverlayFinder())
