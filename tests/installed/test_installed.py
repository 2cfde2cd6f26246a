"""The install a user gets: the suite runs against the wheel (scripts/test-all.sh), shipped data
is found from any directory, and the one lookup order (flag -> variable -> next to the recipe ->
cwd -> shipped) holds for the patch stack, runner profiles and recipes (issue 14)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bisectbot
from bisectbot.errors import BadInput
from bisectbot.shipped import find_recipe, find_stack, runner_search_path, shipped_dir, shipped_recipes

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
INSTALLED = os.environ.get("BISECTBOT_TEST_INSTALLED") == "1"


def exe() -> str:
    cand = Path(sys.executable).parent / "bisectbot"
    return str(cand) if cand.exists() else shutil.which("bisectbot") or "bisectbot"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BISECTBOT_PATCHES_DIR", "BISECTBOT_RUNNERS", "BISECTBOT_RECIPES", "PYTHONPATH")}
    env.update(extra)
    return env


def bb(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([exe(), *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


# ----------------------------------------------------------------------------- the install itself

@pytest.mark.skipif(not INSTALLED, reason="runs under scripts/test-all.sh (BISECTBOT_TEST_INSTALLED=1): "
                                          "the suite against the installed wheel")
def test_bisectbot_comes_from_the_installed_wheel(tmp_path):
    assert "site-packages" in Path(bisectbot.__file__).parts, bisectbot.__file__
    assert not Path(bisectbot.__file__).resolve().is_relative_to(ROOT / "bisectbot")
    # children started from the checkout (the way tests run `python -m bisectbot`) import it too
    for cwd in (ROOT, tmp_path):
        r = subprocess.run([sys.executable, "-c", "import bisectbot; print(bisectbot.__file__)"], cwd=cwd,
                           capture_output=True, text=True, check=True)
        assert "site-packages" in Path(r.stdout.strip()).parts, (cwd, r.stdout)
    # the shipped data lies inside the wheel, not in the checkout
    for kind in ("patches", "runners", "recipes"):
        d = shipped_dir(kind)
        assert d is not None and "site-packages" in d.parts, (kind, d)
    # no editable-install leftovers: no .pth or finder pointing at the checkout
    site = Path(bisectbot.__file__).parents[1]
    for pth in site.glob("*.pth"):
        assert str(ROOT) not in pth.read_text(errors="replace"), pth


def test_shipped_data_is_complete():
    stack = shipped_dir("patches")
    assert stack is not None and (stack / "stack.yaml").is_file()
    from bisectbot.patches import load_stack

    ids = load_stack(stack / "stack.yaml").ids
    assert {"aiter-chunkq-clamp", "vllm-sparse-mla-workspace", "vllm-sparse-mla-skip-kv-gather"} <= set(ids)
    runners = shipped_dir("runners")
    assert runners is not None and {"cpu", "mi355x"} <= {p.stem for p in runners.glob("*.yaml")}
    assert {p.name for p in shipped_recipes()} == {p.name for p in RECIPES}


# ----------------------------------------------------------------------------- from an empty directory

def test_shipped_commands_work_outside_the_checkout(tmp_path):
    """The issue's first "Done when" row, less the network and Docker parts (tests below)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    r = bb("--version", cwd=empty)
    assert r.returncode == 0 and bisectbot.__version__ in r.stdout, r
    r = bb("patches", "list", cwd=empty)
    assert r.returncode == 0, r.stderr
    assert "vllm-sparse-mla-workspace" in r.stdout
    r = bb("--json", "patches", "list", cwd=empty)
    data = json.loads(r.stdout)
    assert Path(data["stack"]).is_file() and len(data["patches"]) >= 3
    r = bb("recipe", "validate", *map(str, RECIPES), cwd=empty)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(": ok") == len(RECIPES)
    r = bb("recipe", "schema", cwd=empty)
    assert r.returncode == 0 and "properties" in json.loads(r.stdout)
    # a shipped example by name, from anywhere
    r = bb("recipe", "validate", "vllm-workspace-fix-retirement", cwd=empty)
    assert r.returncode == 0, r.stderr
    r = bb("patches", "check", "--source", str(empty), cwd=empty)
    assert r.returncode == 0, r.stderr  # nothing of vllm/aiter in an empty tree: not applicable
    assert not list(empty.iterdir()), "a command wrote into the current directory"


@pytest.mark.docker
def test_runner_check_cpu_outside_the_checkout(tmp_path, require_docker):
    r = bb("runner", "check", "--profile", "cpu", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cpu: CPU only" in r.stdout


@pytest.mark.network
@pytest.mark.slow
def test_release_recipe_runs_outside_the_checkout(tmp_path):
    """`bisectbot run <checkout>/recipes/vllm-workspace-fix-retirement.yaml` from an empty directory:
    needs the package index (PyPI); the expected answer is in the recipe's header."""
    r = bb("--state", str(tmp_path / "state"), "run", str(ROOT / "recipes" / "vllm-workspace-fix-retirement.yaml"),
           "--out", str(tmp_path / "out"), cwd=tmp_path, timeout=1800)
    assert r.returncode in (0, 3), r.stdout + r.stderr[-3000:]
    assert (tmp_path / "out" / "report.md").is_file()


# ----------------------------------------------------------------------------- the lookup order

def _stack_dir(root: Path, pid: str) -> Path:
    """A copy of the shipped stack reduced to nothing but a renamed first patch (so each
    directory is recognisable by its ids)."""
    src = shipped_dir("patches")
    assert src is not None
    dst = root
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    text = (dst / "stack.yaml").read_text()
    (dst / "stack.yaml").write_text(text.replace("id: aiter-chunkq-clamp", f"id: {pid}", 1))
    return dst


def test_stack_lookup_order(tmp_path, monkeypatch):
    rec_dir = tmp_path / "proj" / "recipes"
    rec_dir.mkdir(parents=True)
    recipe = rec_dir / "r.yaml"
    recipe.write_text("name: r\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("BISECTBOT_PATCHES_DIR", raising=False)
    shipped = shipped_dir("patches") / "stack.yaml"
    assert find_stack(None, recipe) == shipped                    # 5. shipped default
    _stack_dir(cwd / "patches", "from-cwd")
    assert find_stack(None, recipe) == cwd / "patches" / "stack.yaml"              # 4. cwd
    _stack_dir(tmp_path / "proj" / "patches", "from-checkout-layout")
    assert find_stack(None, recipe) == tmp_path / "proj" / "patches" / "stack.yaml"  # 3. ../patches
    _stack_dir(rec_dir / "patches", "beside")
    assert find_stack(None, recipe) == rec_dir / "patches" / "stack.yaml"           # 3. beside
    env_dir = _stack_dir(tmp_path / "env", "from-env")
    monkeypatch.setenv("BISECTBOT_PATCHES_DIR", str(env_dir))
    assert find_stack(None, recipe) == env_dir / "stack.yaml"                       # 2. variable
    flag = _stack_dir(tmp_path / "flag", "from-flag")
    assert find_stack(flag / "stack.yaml", recipe) == flag / "stack.yaml"           # 1. flag
    assert find_stack(flag, recipe) == flag / "stack.yaml"                          # (a directory)


def test_stack_errors_name_the_flag_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("BISECTBOT_PATCHES_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(BadInput, match="BISECTBOT_PATCHES_DIR"):
        find_stack()
    with pytest.raises(BadInput, match="--stack"):
        find_stack(tmp_path / "missing.yaml")


def test_recipe_without_patches_never_needs_a_stack(tmp_path):
    """A broken BISECTBOT_PATCHES_DIR only matters to recipes that name patches."""
    no_patches = tmp_path / "plain.yaml"
    no_patches.write_text((ROOT / "recipes" / "demo.yaml").read_text())
    env = clean_env(BISECTBOT_PATCHES_DIR=str(tmp_path / "nowhere"))
    r = bb("recipe", "validate", str(no_patches), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    r = bb("recipe", "validate", str(ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml"), cwd=tmp_path, env=env)
    assert r.returncode == 2
    assert "BISECTBOT_PATCHES_DIR" in r.stderr and "--stack" in r.stderr


def test_recipe_next_to_its_own_stack_uses_it(tmp_path):
    """A project directory with recipes/ and patches/ (the checkout layout): the recipe's patch ids
    are checked against that stack, from any cwd."""
    proj = tmp_path / "proj"
    _stack_dir(proj / "patches", "my-own-fix")
    (proj / "recipes").mkdir()
    text = (ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml").read_text()
    (proj / "recipes" / "r.yaml").write_text(text.replace("  - aiter-chunkq-clamp\n", "  - my-own-fix\n"))
    r = bb("recipe", "validate", str(proj / "recipes" / "r.yaml"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = bb("recipe", "validate", str(ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml"),
           "--stack", str(proj / "patches" / "stack.yaml"), cwd=tmp_path)
    assert r.returncode == 2 and "aiter-chunkq-clamp" in r.stderr


def test_runner_profile_lookup_order(tmp_path, monkeypatch):
    from bisectbot.runner_profile import load_profile

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BISECTBOT_RUNNERS", raising=False)
    recipe = tmp_path / "proj" / "recipes" / "r.yaml"
    recipe.parent.mkdir(parents=True)
    assert load_profile("cpu", recipe).description == "CPU only, no devices"       # shipped
    for where, label in ((tmp_path / "runners", "cwd"), (tmp_path / "proj" / "runners", "checkout-layout"),
                         (recipe.parent / "runners", "beside")):
        where.mkdir(parents=True)
        (where / "cpu.yaml").write_text(f"name: cpu\ndescription: {label}\n")
        assert load_profile("cpu", recipe).description == label
    env = tmp_path / "env"
    env.mkdir()
    (env / "cpu.yaml").write_text("name: cpu\ndescription: env\n")
    monkeypatch.setenv("BISECTBOT_RUNNERS", str(env))
    assert load_profile("cpu", recipe).description == "env"
    assert runner_search_path(recipe)[0] == env
    with pytest.raises(BadInput, match="BISECTBOT_RUNNERS") as e:
        load_profile("no-such-profile", recipe)
    assert "--profile" in str(e.value) and "mi355x" in str(e.value)


def test_recipe_names_resolve_to_shipped_examples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BISECTBOT_RECIPES", raising=False)
    assert find_recipe("demo") == shipped_dir("recipes") / "demo.yaml"
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "demo.yaml").write_text("name: mine\n")
    assert find_recipe("demo.yaml") == tmp_path / "recipes" / "demo.yaml"
    with pytest.raises(BadInput, match="BISECTBOT_RECIPES") as e:
        find_recipe("nope")
    assert "vllm-workspace-fix-retirement" in str(e.value)
