"""``bisectbot runner check``: can this host run probes with a runner profile?"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from .. import jsonio as _jsonio
from ..errors import EXIT_ERROR
from .base import Ctx, cli, error_document, pass_ctx


def gpu_count() -> tuple[int | None, str]:
    """GPUs seen by ``amd-smi``, ``rocm-smi`` or ``nvidia-smi`` (first present wins): ``(count, tool)``;
    ``(None, "")`` when none of them is installed."""
    def run(argv: list[str]) -> str | None:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return p.stdout if p.returncode == 0 else None

    if shutil.which("amd-smi"):
        out = run(["amd-smi", "list", "--json"])
        if out is not None:
            try:
                data = _jsonio.loads(out)
                return (len(data) if isinstance(data, list) else len(data.get("gpus", data))), "amd-smi"
            except ValueError:
                return sum(1 for ln in out.splitlines() if ln.strip().startswith("GPU:")), "amd-smi"
    if shutil.which("rocm-smi"):
        out = run(["rocm-smi", "--showid", "--json"])
        if out is not None:
            try:
                return sum(1 for k in _jsonio.loads(out) if k.startswith("card")), "rocm-smi"
            except ValueError:
                pass
    if shutil.which("nvidia-smi"):
        out = run(["nvidia-smi", "-L"])
        if out is not None:
            return sum(1 for ln in out.splitlines() if ln.startswith("GPU ")), "nvidia-smi"
    return None, ""


def run_checks(profile_name: str, state_dir: Path | None, recipe_file: str | None = None, *,
               docker: bool = True) -> list[dict[str, Any]]:
    """One dict per check: ``name``, ``ok`` (bool), ``detail``, ``required`` (a failed required check
    makes ``runner check`` exit 1). ``recipe_file`` (a path or a shipped recipe's name) adds a
    ``mounts`` check: its ``server.mounts`` against the profile's (a clash is a warning: the run
    keeps the recipe's, issue 24 input 1). ``docker`` False leaves out the Docker daemon and its
    disk (``run`` with the local runner, which starts no container).

    The same checks run before ``bisectbot run`` probes anything (:func:`bisectbot.cli.run_cmd.preflight`,
    issue 35): the host's failures are never verdicts."""
    from ..ledger import default_state_dir
    from ..runner_profile import load_profile

    checks: list[dict[str, Any]] = []

    def add(name: str, ok: bool, detail: str, required: bool = True, observed: bool = True) -> None:
        checks.append({"name": name, "ok": ok, "detail": detail, "required": required, "observed": observed})

    recipe = recipe_path = None
    if recipe_file:
        from ..recipe import load_recipe
        from ..shipped import find_recipe

        recipe_path = find_recipe(recipe_file)
        recipe = load_recipe(recipe_path)
    profile = load_profile(profile_name, recipe_path)
    add("profile", True, f"{profile.name}: {profile.description}")
    if recipe is not None:
        from ..runner_profile import merge_mounts

        plan = merge_mounts(profile, list(recipe.server.mounts))
        binds = ", ".join(f"{b.host}:{b.container} ({b.origin})" for b in plan.binds) or "none"
        if plan.replaced:
            add("mounts", False, f"recipe {recipe.name}: " + "; ".join(plan.replaced) + f"; the container gets {binds}",
                required=False)
        else:
            add("mounts", True, f"recipe {recipe.name}: {binds}")
    docker_root = None
    try:
        if not docker:
            raise LookupError
        import docker as docker_py

        client = docker_py.from_env()
        client.ping()
        v = client.version()
        docker_root = client.info().get("DockerRootDir")
        add("docker", True, f"daemon {v.get('Version')} (API {v.get('ApiVersion')}), root {docker_root}")
    except LookupError:
        pass
    except Exception as e:  # docker.errors.DockerException, requests errors
        add("docker", False, f"cannot reach the Docker daemon: {str(e).splitlines()[0][:200]}")
    for path, _, _ in profile.expanded_devices():
        ok = os.path.exists(path)
        add(f"device {path}", ok, "present" if ok else "missing (no GPU driver or not passed into this host)")
    count, tool = gpu_count()
    need = max((max(int(x) for x in _gpus(s)) + 1 for s in profile.gpu_slots), default=0)
    if count is None:
        add("gpus", need == 0, "no amd-smi/rocm-smi/nvidia-smi found" + (f"; profile needs {need}" if need else ""),
            required=need > 0, observed=False)  # the count is unknown, not seen to be short
    else:
        add("gpus", count >= need, f"{count} GPU(s) by {tool}; profile slots need {need}", required=need > 0)
    for label, path in (("disk docker", docker_root), ("disk state", str(state_dir or default_state_dir()))):
        if not path:
            continue
        p = Path(path)
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            free = shutil.disk_usage(p).free / 1e9
            need = f" (profile {profile.name} needs {profile.min_free_gb:g} GB: min_free_gb)" if label == "disk docker" else ""
            add(label, free >= profile.min_free_gb or label == "disk state", f"{free:.1f} GB free at {path}{need}",
                required=label == "disk docker")
        except OSError as e:
            add(label, False, f"{path}: {e}", required=False)
    ok, detail = state_writable(Path(state_dir or default_state_dir()))
    add("state writable", ok, detail)
    for c in profile.expanded_cache_dirs():
        p = Path(c)
        ok = p.is_dir() and os.access(p, os.W_OK)
        add(f"cache {c}", ok, "writable" if ok else "missing or not writable (created on first use)", required=False)
    return checks


STATE_PROBE_BYTES = 1024 * 1024
"""Bytes written (and removed) in the state directory to see that the ledger, logs and worktrees fit."""


def state_writable(state_dir: Path) -> tuple[bool, str]:
    """Whether the bot can write ``state_dir`` (created if missing): a file of :data:`STATE_PROBE_BYTES`
    is written, synced and removed. ``(ok, detail)``; the detail names the error (no space left on
    device, read-only file system, permission denied) and what to do."""
    import tempfile

    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".preflight-", dir=state_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(b"\0" * STATE_PROBE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            os.unlink(name)
    except OSError as e:
        return False, (f"{state_dir}: cannot write {STATE_PROBE_BYTES // 1024} KiB: {e.strerror or e}; free space "
                       "there or give another directory with --state")
    return True, f"{state_dir}: writable"


def _gpus(slot: str) -> list[int]:
    from ..slots import slot_gpus

    return slot_gpus(slot) or [-1]


@cli.group(epilog="""\b
Examples:
  bisectbot runner check --profile cpu
  bisectbot runner check --profile runners/mi355x.yaml
""")
def runner() -> None:
    """Runner profiles and host checks."""


@runner.command("check", epilog="""\b
Examples:
  bisectbot runner check --profile mi355x
  bisectbot --json runner check --profile runners/cpu.yaml
""")
@click.option("--profile", "profile_name", default=None,
              help="runner profile name or YAML path [default: the recipe's runner, else cpu]")
@click.option("--recipe", "recipe_file", default=None,
              help="recipe (path or shipped name) whose server mounts are checked against the profile's")
@pass_ctx
def check(ctx: Ctx, profile_name: str | None, recipe_file: str | None) -> None:
    """Report Docker access, devices, GPU count, disk space and cache dirs (and, with --recipe,
    mount clashes between the recipe and the profile); exit 1 when a required check fails.

    --json: the list of checks; when a required check fails, ``{"error": {"kind", "message"},
    "exit_code": 1}`` (the message names each failed check and its detail)."""
    if profile_name is None:
        profile_name = "cpu"
        if recipe_file:
            from ..recipe import load_recipe
            from ..shipped import find_recipe

            profile_name = load_recipe(find_recipe(recipe_file)).runner
    checks = run_checks(profile_name, ctx.state_dir, recipe_file)
    text = "\n".join(f"{'ok  ' if c['ok'] else ('FAIL' if c['required'] else 'warn')} {c['name']:24} {c['detail']}"
                     for c in checks)
    failed = [f"{c['name']}: {c['detail']}" for c in checks if not c["ok"] and c["required"]]
    if failed and ctx.json:  # the documented failure shape (issue 24, input 6)
        ctx.emit(error_document("runner check", "required checks failed: " + "; ".join(failed), EXIT_ERROR))
    else:
        ctx.emit(checks, text)
    if failed:
        sys.exit(EXIT_ERROR)
