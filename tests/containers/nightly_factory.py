"""Build and push fake "nightly" images of the reference engine into a local registry.

For end-to-end tests (issue 5 and issue 8). Each nightly looks, to bisectbot, like a
ROCm vLLM image: a ``vllm`` package in ``/usr/local/lib/python3.11/dist-packages`` whose
version string carries a commit (``0.19.1rc1.dev296+gbcc2306ce``), an ``amd-aiter``
distribution and ``aiter`` package, a ``torch`` package with ``torch/version.py``
(``__version__``, ``hip``) and ``/app/versions.txt``. Serving is done by the reference
engine (``bisectbot.demo.engine``, stdlib only, copied into ``/opt/bisectbot``), started
through the fake vLLM's launcher so that the *installed package files decide the behaviour*:
``vllm/engine_config.py`` and ``aiter/engine_config.py`` each hold ``GARBAGE_ABOVE`` (prompt
tokens above which the engine answers garbage; the lower wins), so a source overlay or a patch
of either file changes a verdict, and a regression can come from either component.

Usage::

    from tests.containers.nightly_factory import NightlySpec, push_nightlies

    pushed = push_nightlies(
        [NightlySpec("nightly_main_20260401", vllm_version="0.19.1rc1.dev1+gaaaaaaa", garbage_above=100000),
         NightlySpec("nightly_main_20260402", vllm_version="0.19.1rc1.dev2+gbbbbbbb", garbage_above=3000)],
        repository="bisectbot-test/vllm-dev-abc123",        # registry 127.0.0.1:5000 by default
    )
    pushed[0].pinned   # '127.0.0.1:5000/bisectbot-test/vllm-dev-abc123@sha256:...'

Server command for a recipe: ``SERVER_COMMAND`` (``python3 -m vllm.serve --port {port} --model {model}``;
arguments after ``--port P`` go to the engine, e.g. ``--model demo``, ``--flaky 0.1``), or vLLM's own
``vllm serve {model} --port {port} ...`` through the stand-in ``vllm`` script (:data:`VLLM_CLI`).
The base image (Debian bookworm + python3) comes from :func:`baseimage.ensure_base_image`.
Building 3 nightlies and pushing them takes a few seconds once the base exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .baseimage import ensure_base_image

SITE = "/usr/local/lib/python3.11/dist-packages"
SERVER_COMMAND = ["python3", "-m", "vllm.serve", "--port", "{port}", "--model", "{model}"]
REPO_ROOT = Path(__file__).resolve().parents[2]
MINI_ENGINE = Path(__file__).resolve().parent / "mini_engine.py"

DEFAULT_VERSIONS_TXT = {
    "BASE_IMAGE": "rocm/dev-ubuntu-22.04:7.2-complete",
    "TRITON_BRANCH": "f9e5bf54",
    "TRITON_REPO": "https://github.com/ROCm/triton.git",
    "PYTORCH_BRANCH": "8514f05",
    "PYTORCH_REPO": "https://github.com/ROCm/pytorch.git",
    "FA_BRANCH": "1a7f4dfa",
    "AITER_BRANCH": "v0.1.10.post3",
    "AITER_REPO": "https://github.com/ROCm/aiter.git",
}


def vllm_sources(garbage_above: int = 1_000_000) -> dict[str, str]:
    """The fake vLLM package's source files (package-relative path -> text), as a git tree holds
    them (``_version.py`` is generated at install time, as setuptools-scm does)."""
    return {
        "__init__.py": "from ._version import __version__  # noqa: F401\n",
        "engine_config.py": f"# Prompt tokens above which answers turn to garbage.\nGARBAGE_ABOVE = {garbage_above}\n",
        "serve.py": textwrap.dedent('''\
            """Launch the reference engine with this vLLM's settings (``python3 -m vllm.serve --port P``)."""
            import json
            import os
            import sys

            from vllm.engine_config import GARBAGE_ABOVE

            try:  # aiter can break it too (the lower threshold wins)
                from aiter.engine_config import GARBAGE_ABOVE as AITER_GARBAGE_ABOVE
                GARBAGE_ABOVE = min(GARBAGE_ABOVE, AITER_GARBAGE_ABOVE)
            except ImportError:
                pass

            args = sys.argv[1:]
            port = "8000"
            if "--port" in args:
                i = args.index("--port")
                port = args[i + 1]
                del args[i:i + 2]
            with open("/opt/bisectbot/engine_argv.json") as f:
                argv = [a.format(port=port, threshold=GARBAGE_ABOVE) for a in json.load(f)] + args
            print("vllm.serve: starting engine:", " ".join(argv), flush=True)
            os.execvp(sys.executable, [sys.executable] + argv)
            '''),
    }


VLLM_CLI = textwrap.dedent('''\
    #!/usr/bin/env python3
    """Stand-in for vLLM's ``vllm`` console script: ``vllm serve MODEL [--port P] [--max-model-len N] ...``
    starts the reference engine through this image's ``vllm.serve`` (so the installed package files
    still decide the behaviour) serving MODEL; vLLM's other flags are accepted and ignored."""
    import json
    import os
    import sys

    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "serve" or args[1].startswith("-"):
        sys.exit("usage: vllm serve MODEL [--port P] [--max-model-len N] [vLLM flags]")
    model, rest = args[1], args[2:]
    if os.path.exists("/opt/bisectbot/require.json"):  # what a ROCm vLLM needs of its container (NightlySpec.require)
        with open("/opt/bisectbot/require.json") as f:
            need = json.load(f)
        lack = [p for p in need.get("paths", []) if not os.path.exists(p)]
        lack += [f"${v}" for v, want in need.get("env", {}).items() if os.environ.get(v, "") != want]
        gpus = [g for g in os.environ.get(need.get("gpus_env", ""), "").split(",") if g]
        tp = rest[rest.index("-tp") + 1] if "-tp" in rest[:-1] else "1"
        if need.get("gpus_env") and len(gpus) != int(tp):
            lack.append(f"{len(gpus)} GPUs in ${need['gpus_env']} for -tp {tp}")
        if lack:
            print("vllm (stand-in): this container cannot serve:", ", ".join(lack), file=sys.stderr, flush=True)
            sys.exit(1)
    opts = {}
    for name in ("--port", "--max-model-len"):
        if name in rest and rest.index(name) + 1 < len(rest):
            opts[name] = rest[rest.index(name) + 1]
    argv = ["-m", "vllm.serve", "--port", opts.get("--port", "8000"), "--model", model]
    if "--max-model-len" in opts:
        argv += ["--max-model-len", opts["--max-model-len"]]
    print("vllm (stand-in): serve", model, "ignoring", " ".join(a for a in rest if a not in argv), flush=True)
    os.execvp(sys.executable, [sys.executable, *argv])
    ''')
"""``/usr/local/bin/vllm`` of every nightly: a recipe's real ``vllm serve {model} --port {port} ...`` command
(``recipes/glm51-fp8-sparse-mla-prefill.yaml``) runs unchanged."""


def aiter_sources(garbage_above: int = 1_000_000) -> dict[str, str]:
    """The fake aiter package's source files (package-relative path -> text). Its
    ``engine_config.GARBAGE_ABOVE`` lowers the engine's threshold when smaller than vLLM's,
    so a regression can come from either component."""
    return {
        "__init__.py": "",
        "engine_config.py": f"# Prompt tokens above which aiter kernels corrupt the output.\nGARBAGE_ABOVE = {garbage_above}\n",
        "ops/triton/attention/pa_mqa_logits.py":
            "def stage1(heads, ChunkQ=64):\n    TileQCount = heads // ChunkQ\n    return 1 // TileQCount\n",
    }


@dataclass
class NightlySpec:
    """One fake nightly. ``garbage_above`` / ``aiter_garbage_above`` are prompt tokens (the lower
    one wins); ``vllm_files`` / ``aiter_files`` override or extend :func:`vllm_sources` /
    :func:`aiter_sources`; ``files`` adds absolute-path files; ``versions_txt`` overrides
    :data:`DEFAULT_VERSIONS_TXT` keys (value None removes a key). ``require``: what the stand-in
    ``vllm serve`` (:data:`VLLM_CLI`) refuses to start without, as a ROCm vLLM does without GPUs:
    ``{"paths": [...], "env": {NAME: value}, "gpus_env": NAME}`` (that variable must list ``-tp`` GPUs)."""

    tag: str
    vllm_version: str = "0.19.1rc1.dev296+gbcc2306ce"
    aiter_version: str = "0.1.10.post3"
    torch_version: str = "2.10.0+git8514f05"
    hip_version: str = "7.2.53211"
    garbage_above: int = 1_000_000
    aiter_garbage_above: int = 1_000_000
    versions_txt: dict[str, str | None] = field(default_factory=dict)
    vllm_files: dict[str, str] = field(default_factory=dict)
    aiter_files: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    require: dict | None = None


@dataclass
class PushedNightly:
    """A pushed nightly: ``ref`` is ``host/repo:tag``, ``pinned`` is ``host/repo@digest``."""

    spec: NightlySpec
    ref: str
    digest: str
    pinned: str


def engine_argv() -> tuple[list[str], dict[str, str]]:
    """Argv template (``{port}``, ``{threshold}``) for the engine inside the image and the files
    (image path -> host path) that carry it: the reference engine when the checkout has it,
    else the stdlib fallback ``mini_engine.py``."""
    demo = REPO_ROOT / "bisectbot" / "demo"
    if (demo / "engine.py").is_file():
        # the engine and the sibling modules it imports (stdlib only): every module of the package
        return (["-m", "bisectbot.demo.engine", "--host", "0.0.0.0", "--port", "{port}",
                 "--threshold", "{threshold}"],
                {f"/opt/bisectbot/bisectbot/demo/{f.name}": str(f)
                 for f in sorted(demo.glob("*.py")) if f.name != "__init__.py"})
    return (["/opt/bisectbot/mini_engine.py", "--port", "{port}", "--garbage-above", "{threshold}"],
            {"/opt/bisectbot/mini_engine.py": str(MINI_ENGINE)})


def _write(root: Path, abs_path: str, text: str) -> None:
    p = root / abs_path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def build_nightly(spec: NightlySpec, ref: str, base: str | None = None) -> None:
    """``docker build`` one nightly image tagged ``ref`` from ``base`` (default: the debootstrap base)."""
    base = base or ensure_base_image()
    with tempfile.TemporaryDirectory(prefix="bisectbot-nightly-") as tmp:
        ctx = Path(tmp)
        root = ctx / "root"
        files = dict(vllm_sources(spec.garbage_above))
        files.update(spec.vllm_files)
        files["_version.py"] = f'__version__ = version = "{spec.vllm_version}"\n'
        for rel, text in files.items():
            _write(root, f"{SITE}/vllm/{rel}", text)
        _write(root, f"{SITE}/vllm-{spec.vllm_version.split('+')[0]}.dist-info/METADATA",
               f"Metadata-Version: 2.1\nName: vllm\nVersion: {spec.vllm_version}\n")
        afiles = dict(aiter_sources(spec.aiter_garbage_above))
        afiles.update(spec.aiter_files)
        for rel, text in afiles.items():
            _write(root, f"{SITE}/aiter/{rel}", text)
        _write(root, f"{SITE}/amd_aiter-{spec.aiter_version.split('+')[0]}.dist-info/METADATA",
               f"Metadata-Version: 2.1\nName: amd-aiter\nVersion: {spec.aiter_version}\n")
        _write(root, f"{SITE}/torch/__init__.py", "from .version import __version__  # noqa: F401\n")
        _write(root, f"{SITE}/torch/version.py",
               f"__version__ = '{spec.torch_version}'\ndebug = False\ncuda = None\nhip = '{spec.hip_version}'\n")
        _write(root, f"{SITE}/torch-{spec.torch_version.split('+')[0]}.dist-info/METADATA",
               f"Metadata-Version: 2.1\nName: torch\nVersion: {spec.torch_version}\n")
        vt = dict(DEFAULT_VERSIONS_TXT)
        vt.update(spec.versions_txt)
        _write(root, "/app/versions.txt", "".join(f"{k}: {v}\n" for k, v in vt.items() if v is not None))
        argv, engine_files = engine_argv()
        _write(root, "/opt/bisectbot/engine_argv.json", json.dumps(argv))
        _write(root, "/opt/bisectbot/bisectbot/__init__.py", "")
        _write(root, "/opt/bisectbot/bisectbot/demo/__init__.py", "")
        for dest, src in engine_files.items():
            d = root / dest.lstrip("/")
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, d)
        for path, text in spec.files.items():
            _write(root, path, text)
        _write(root, "/usr/local/bin/vllm", VLLM_CLI)
        if spec.require is not None:
            _write(root, "/opt/bisectbot/require.json", json.dumps(spec.require))
        (root / "usr/local/bin/vllm").chmod(0o755)
        labels = "".join(f" {json.dumps(k)}={json.dumps(v)}" for k, v in spec.labels.items())
        (ctx / "Dockerfile").write_text(
            f"FROM {base}\nCOPY root/ /\nENV PYTHONPATH=/opt/bisectbot PYTHONDONTWRITEBYTECODE=1\n"
            + (f"LABEL{labels}\n" if labels else "")
            + 'CMD ["python3", "-m", "vllm.serve", "--port", "8000"]\n'
        )
        p = subprocess.run(["docker", "build", "-q", "-t", ref, str(ctx)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"docker build of {ref} failed: {p.stderr.strip()[-2000:]}")


def push_nightlies(specs: list[NightlySpec], repository: str,
                   registry: str = f"127.0.0.1:{os.environ.get('BISECTBOT_REGISTRY_PORT', '5000')}",
                   base: str | None = None) -> list[PushedNightly]:
    """Build each spec as ``registry/repository:<tag>``, push it and return the pushed digests.

    Raises ``RuntimeError`` with docker's message when a build or push fails.
    """
    out = []
    for spec in specs:
        ref = f"{registry}/{repository}:{spec.tag}"
        build_nightly(spec, ref, base)
        p = subprocess.run(["docker", "push", ref], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"docker push {ref} failed: {p.stderr.strip()[-2000:]}")
        insp = subprocess.run(["docker", "image", "inspect", "-f", "{{json .RepoDigests}}", ref],
                              capture_output=True, text=True, check=True)
        digests = [d for d in json.loads(insp.stdout) if d.startswith(f"{registry}/{repository}@")]
        if not digests:
            raise RuntimeError(f"no repo digest for {ref} after push")
        digest = digests[0].split("@", 1)[1]
        out.append(PushedNightly(spec, ref, digest, f"{registry}/{repository}@{digest}"))
    return out
