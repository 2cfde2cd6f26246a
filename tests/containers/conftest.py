"""Fixtures of the containers area: real dockerd, real registry on 127.0.0.1:5000, real git.

Session fixtures share the expensive parts: the debootstrap base image (cached across runs
as ``bisectbot-test/base:bookworm``), one fake vLLM git history, and three nightlies pushed
to a repository unique to this session. A session-end check fails the run when any
container created during the session is left behind (and removes it).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import git
import pytest
import requests

from tests.containers.baseimage import ensure_base_image
from tests.containers.nightly_factory import SERVER_COMMAND, NightlySpec, push_nightlies, vllm_sources

REGISTRY = f"127.0.0.1:{os.environ.get('BISECTBOT_REGISTRY_PORT', '5000')}"  # as scripts/services.sh starts it
DATA = Path(__file__).parent / "data"


# Labels every container this session (and its CLI children) makes; setdefault keeps one id even if
# this module is imported twice (pytest's conftest instance and ``from tests.containers.conftest``).
RUN_ID = os.environ.setdefault("BISECTBOT_RUN_ID", f"tests-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def our_containers(*filters: str) -> list[str]:
    """Ids of containers of this test session (``bisectbot.run`` label), optionally further filtered."""
    args = ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label=bisectbot.run={RUN_ID}"]
    for f in filters:
        args += ["--filter", f]
    p = subprocess.run(args, capture_output=True, text=True)
    return p.stdout.split()


@pytest.fixture(scope="session", autouse=True)
def no_container_left_behind():
    """Session-end check: no container made by this session's bisectbot code is left (several test
    sessions may share one daemon, so the check is scoped by the session's run label)."""
    from tests.conftest import docker_available

    yield
    if not docker_available():
        return
    left = our_containers()
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
        pytest.fail(f"containers left behind by the containers tests: {sorted(c[:12] for c in left)}")


@pytest.fixture(scope="session")
def registry(require_docker) -> str:
    """The local registry (``scripts/services.sh`` starts it)."""
    try:
        r = requests.get(f"http://{REGISTRY}/v2/", timeout=5)
        assert r.status_code == 200, r.status_code
    except (requests.RequestException, AssertionError) as e:
        pytest.fail(f"local registry {REGISTRY} unreachable ({e}): run scripts/services.sh")
    return REGISTRY


@pytest.fixture(scope="session")
def base_image(require_docker) -> str:
    return ensure_base_image()


def _commit(repo: git.Repo, files: dict[str, str | None], message: str) -> str:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        p = root / rel
        if text is None:
            repo.index.remove([rel], working_tree=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message).hexsha


@pytest.fixture(scope="session")
def vllm_repo(tmp_path_factory) -> dict:
    """A fake vLLM clone: A (initial) -> B (python-only) -> C (threshold drops to 3000, the
    regression) -> D (touches csrc/*.cu: compiled). Returns ``{"path", "A", "B", "C", "D"}``."""
    path = tmp_path_factory.mktemp("vllm-src")
    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")
    src = {f"vllm/{k}": v for k, v in vllm_sources(1_000_000).items()}
    a = _commit(repo, {**src, "csrc/attention.cu": "// kernel v1\n", "README.md": "fake vllm\n"},
                "Initial fake vLLM (#1)")
    b = _commit(repo, {"vllm/utils.py": "def helper():\n    return 1\n"}, "[Misc] add helper (#2)")
    c = _commit(repo, {"vllm/engine_config.py": vllm_sources(3000)["engine_config.py"]},
                "[ROCm] chunk the sparse indexer prefill (#3)")
    d = _commit(repo, {"csrc/attention.cu": "// kernel v2\n", "vllm/utils.py": "def helper():\n    return 2\n"},
                "[Kernel] faster attention (#4)")
    return {"path": Path(path), "A": a, "B": b, "C": c, "D": d}


def _ver(n: int, sha: str) -> str:
    return f"0.19.1rc1.dev{n}+g{sha[:9]}"


@pytest.fixture(scope="session")
def nightlies(registry, base_image, vllm_repo) -> dict:
    """Three nightlies pushed to ``127.0.0.1:5000/bisectbot-test/vllm-dev-<id>``:
    N1 at commit A, N2 at B (python-only change), N3 at C (garbage above 3000 tokens, and a
    new aiter). Returns ``{"repository", "pushed": [PushedNightly x3], "N1".."N3"}``."""
    repo = f"bisectbot-test/vllm-dev-{uuid.uuid4().hex[:8]}"
    helper = {"utils.py": "def helper():\n    return 1\n"}
    specs = [
        NightlySpec("nightly_main_20260401", vllm_version=_ver(1, vllm_repo["A"]), garbage_above=1_000_000),
        NightlySpec("nightly_main_20260402", vllm_version=_ver(2, vllm_repo["B"]), garbage_above=1_000_000,
                    vllm_files=helper),
        NightlySpec("nightly_main_20260403", vllm_version=_ver(3, vllm_repo["C"]), garbage_above=3000,
                    vllm_files=helper),
    ]
    pushed = push_nightlies(specs, repo, registry=registry, base=base_image)
    yield {"repository": repo, "pushed": pushed, **{f"N{i + 1}": p for i, p in enumerate(pushed)}}
    # local copies only (the base image stays cached; the registry keeps the session's repository)
    subprocess.run(["docker", "rmi", "-f", *[p.ref for p in pushed], *[p.pinned for p in pushed]],
                   capture_output=True)


@pytest.fixture
def recipe_file(tmp_path, nightlies) -> Path:
    """A recipe over the session's nightlies, CPU runner, the test patch stack's one patch."""
    p = tmp_path / "recipe.yaml"
    cmd = ", ".join(f'"{a}"' for a in SERVER_COMMAND)
    p.write_text(f"""\
name: e2e-containers
model: demo
source:
  kind: registry
  registry: {REGISTRY}
  repository: {nightlies['repository']}
  tag_pattern: "nightly_main_*"
  insecure: true
server:
  command: [{cmd}]
  port: 8000
  health_timeout_s: 60
runner: cpu
patches: [vllm-threshold-fix]
""")
    return p


@pytest.fixture
def stack_dir() -> Path:
    return DATA / "stack"
