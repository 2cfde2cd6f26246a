"""Issue 39, input 1: "broken since v0.24.0" -- releases installed and run, through ``bisectbot run``.

A real local index (pytest-httpserver) serves wheels of ``toypkg`` 1.0..1.6 whose behaviour changes
in 1.4; the reproducer is a command that imports the installed package. Each release is installed
into its own cached environment (no code of it runs at install) and the command runs in the
sandbox with that environment first on ``PATH``.

Kind: *a candidate that is a published release rather than an image or a commit*. Members: the
change in the middle and at the last release, a release whose dependency comes from the same
index, a release with only an sdist (a skip: installing it would run its build), a measured value
over releases (``regress: slower``), a recipe run mode cannot run (patches; a prefill reproducer
without server.command), and a second run that reuses the environments.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from pytest_httpserver import HTTPServer

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]


def wheel(dist: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> tuple[str, bytes]:
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {**files, f"{info}/METADATA": meta,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},sha256={hashlib.sha256(t.encode()).hexdigest()},{len(t.encode())}\n" for n, t in files.items())
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, t in files.items():
            zf.writestr(n, t)
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


def sdist(dist: str, version: str) -> tuple[str, bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for n, t in {"PKG-INFO": f"Name: {dist}\nVersion: {version}\n",
                     "setup.py": "raise SystemExit('the build of this sdist must never run')\n"}.items():
            data = t.encode()
            ti = tarfile.TarInfo(f"{dist}-{version}/{n}")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return f"{dist}-{version}.tar.gz", buf.getvalue()


def publish(httpserver: HTTPServer, project: str, blobs: dict[str, bytes]) -> None:
    for n, d in blobs.items():
        httpserver.expect_request(f"/files/{n}").respond_with_data(d)
    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
              "upload-time": f"2026-02-{i + 1:02d}T00:00:00Z"} for i, (n, d) in enumerate(blobs.items())]
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files})
    httpserver.expect_request(f"/simple/{project}/").respond_with_data(
        body, content_type="application/vnd.pypi.simple.v1+json")


def toypkg(version: str, speed: float = 100.0) -> dict[str, str]:
    answer = 42 if version < "1.4" else 41
    return {"toypkg/__init__.py": f"VERSION = {version!r}\nSPEED = {speed}\n\ndef answer():\n    return {answer}\n"}


def serve(httpserver: HTTPServer, *, sdist_only: tuple[str, ...] = (), dep: bool = False,
          speeds: dict[str, float] | None = None) -> str:
    blobs = {}
    for v in VERSIONS:
        if v in sdist_only:
            n, d = sdist("toypkg", v)
        else:
            files = toypkg(v, (speeds or {}).get(v, 100.0))
            n, d = wheel("toypkg", v, files, ("toydep",) if dep else ())
        blobs[n] = d
    publish(httpserver, "toypkg", blobs)
    if dep:
        publish(httpserver, "toydep", dict([wheel("toydep", "1.0", {"toydep/__init__.py": "OK = True\n"})]))
    return httpserver.url_for("/simple/")


CHECK = ("import sys, toypkg; print('toypkg', toypkg.VERSION, 'at', toypkg.__file__); "
         "sys.exit(0 if toypkg.answer() == 42 else 1)")


def recipe(tmp: Path, url: str, command: list[str], **extra) -> Path:
    data = {"name": "toy", "source": {"kind": "pypi", "package": "toypkg", "index_url": url},
            "reproducer": {"kind": "command", "command": command, "command_timeout_s": 60},
            "bisect": {"good": "1.0", "bad": "1.6"}, "report": {"dir": str(tmp / "out")}, **extra}
    p = tmp / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def run(tmp: Path, r: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BISECTBOT_CACHE=str(tmp / "cache"))
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp / "state"), "run", str(r), *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def stage(tmp: Path) -> dict:
    return json.loads((tmp / "out" / "result.json").read_text())["stages"][-1]


def test_a_behaviour_change_between_releases_is_named(httpserver: HTTPServer, tmp_path: Path) -> None:
    r = recipe(tmp_path, serve(httpserver), ["python", "-c", CHECK])
    p = run(tmp_path, r)
    assert p.returncode == 0, p.stdout + p.stderr
    st = stage(tmp_path)
    assert st["first_bad"]["ref"] == "1.4" and st["last_good"]["ref"] == "1.3"
    # the command ran the release's own installed package, each in its environment
    logs = {pr["candidate"]["ref"]: pr for pr in st["probes"]}
    assert "toypkg 1.4 at " in logs["1.4"]["extra"]["stdout_tail"]
    assert "/envs/toypkg-1.4-" in logs["1.4"]["extra"]["stdout_tail"]
    envs = sorted(p.name for p in (tmp_path / "cache" / "envs").iterdir() if p.is_dir())
    assert len(envs) == len({pr["candidate"]["ref"] for pr in st["probes"]}) < len(VERSIONS)
    # a second run (another state) installs nothing again: the environments are cached
    p2 = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state2"), "run", str(r)],
                        capture_output=True, text=True, timeout=600, cwd=ROOT,
                        env=dict(os.environ, BISECTBOT_CACHE=str(tmp_path / "cache")))
    assert p2.returncode == 0, p2.stdout + p2.stderr
    logs2 = [json.loads(f.read_text()) for f in (tmp_path / "state2" / "logs" / "toy").glob("*.json")]
    assert logs2 and not any(log["installed_now"] for log in logs2)


def test_the_newest_release_and_a_dependency_from_the_same_index(httpserver: HTTPServer, tmp_path: Path) -> None:
    url = serve(httpserver, dep=True)
    check = CHECK.replace("import sys, toypkg;", "import sys, toypkg, toydep; assert toydep.OK;")
    r = recipe(tmp_path, url, ["python", "-c", check.replace("< \"1.4\"", "")],
               bisect={"good": "1.3", "bad": "1.6"})
    p = run(tmp_path, r)
    assert p.returncode == 0, p.stdout + p.stderr
    assert stage(tmp_path)["first_bad"]["ref"] == "1.4"


def test_a_release_without_a_wheel_is_a_skip_and_its_build_never_runs(httpserver: HTTPServer, tmp_path: Path) -> None:
    r = recipe(tmp_path, serve(httpserver, sdist_only=("1.4",)), ["python", "-c", CHECK])
    p = run(tmp_path, r)
    assert p.returncode in (0, 3), p.stdout + p.stderr
    st = stage(tmp_path)
    skipped = [pr for pr in st["probes"] if pr["verdict"] == "skip"]
    assert st["status"] != "culprit" or st["first_bad"]["ref"] == "1.5"
    assert [pr["candidate"]["ref"] for pr in skipped] == ["1.4"] and "no wheel" in skipped[0]["reason"]
    assert "must never run" not in p.stdout + p.stderr


def test_a_slowdown_between_releases_is_measured(httpserver: HTTPServer, tmp_path: Path) -> None:
    speeds = {v: (100.0 if v < "1.5" else 60.0) for v in VERSIONS}
    bench = "import random, toypkg; print(toypkg.SPEED * (1 + 0.03 * random.gauss(0, 1)))"
    r = recipe(tmp_path, serve(httpserver, speeds=speeds), ["python", "-c", bench], regress="slower")
    p = run(tmp_path, r)
    assert p.returncode == 0, p.stdout + p.stderr
    assert stage(tmp_path)["first_bad"]["ref"] == "1.5"


@pytest.mark.parametrize("extra, says", [
    ({"patches": ["vllm-sparse-mla-workspace"]}, "patches: a release from the package index runs as published"),
    ({"reproducer": {"kind": "prefill"}, "regress": "garbage"}, "a release is served by server.command"),
])
def test_a_recipe_run_mode_cannot_run_is_refused_before_anything_is_installed(
        httpserver: HTTPServer, tmp_path: Path, extra: dict, says: str) -> None:
    r = recipe(tmp_path, serve(httpserver), ["python", "-c", CHECK])
    data = yaml.safe_load(r.read_text())
    data.update(extra)
    r.write_text(yaml.safe_dump(data))
    p = run(tmp_path, r)
    assert p.returncode == 2, p.stdout + p.stderr
    assert says in p.stderr and "r.yaml:" in p.stderr, p.stderr
    assert not (tmp_path / "cache" / "envs").exists()


def test_recipe_validate_names_the_field_of_a_release_run_that_cannot_run(tmp_path: Path) -> None:
    r = recipe(tmp_path, "http://127.0.0.1:9/simple/", ["python", "-c", CHECK])
    r.write_text(r.read_text() + "patches: [vllm-sparse-mla-workspace]\n")
    p = subprocess.run([sys.executable, "-m", "bisectbot", "recipe", "validate", str(r)], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    lines = len(r.read_text().splitlines())
    assert p.returncode == 2 and f"r.yaml:{lines}:" in p.stderr and "patches:" in p.stderr, p.stderr


def test_an_environment_imports_the_release_and_is_reused(httpserver: HTTPServer, tmp_path: Path) -> None:
    from bisectbot.run.envs import COMPLETE, env_bin, release_env

    url = serve(httpserver, dep=True)
    name, data = wheel("toypkg", "1.2", toypkg("1.2"), ("toydep",))
    w = tmp_path / name
    w.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    env, made = release_env(w, sha, "toypkg", "1.2", tmp_path / "cache", index_url=url, timeout_s=120)
    assert made and (env / COMPLETE).is_file()
    out = subprocess.run([str(env_bin(env) / "python"), "-c", "import toypkg, toydep; print(toypkg.VERSION, toydep.OK)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "1.2 True", out.stderr
    assert release_env(w, sha, "toypkg", "1.2", tmp_path / "cache", index_url=url, timeout_s=120) == (env, False)
    (env / COMPLETE).unlink()  # a killed install: made again
    assert release_env(w, sha, "toypkg", "1.2", tmp_path / "cache", index_url=url, timeout_s=120)[1] is True


@pytest.mark.parametrize("ref", ["file", "sdist"])
def test_a_dependency_that_would_be_built_is_a_skip_and_nothing_of_it_runs(httpserver: HTTPServer, tmp_path: Path,
                                                                            ref: str) -> None:
    """Kind: *installing a release runs code of the candidate on the host*. Members: a dependency given
    by URL to a source directory (``Requires-Dist: x @ file:///...``, which pip builds even under
    --only-binary), and a dependency the index has only as an sdist."""
    marker = tmp_path / "BUILT_OUTSIDE_THE_SANDBOX"
    setup = f"open({str(marker)!r}, 'w').write('x')\nfrom setuptools import setup\nsetup(name='evildep', version='1.0')\n"
    if ref == "file":
        src = tmp_path / "evilsrc"
        src.mkdir()
        (src / "setup.py").write_text(setup)
        requires = (f"evildep @ file://{src}",)
    else:
        publish(httpserver, "evildep", dict([sdist("evildep", "1.0")]))
        requires = ("evildep",)
    blobs = dict(wheel("toypkg", v, toypkg(v), requires if v == "1.2" else ()) for v in VERSIONS)
    publish(httpserver, "toypkg", blobs)
    r = recipe(tmp_path, httpserver.url_for("/simple/"), ["python", "-c", CHECK])
    p = run(tmp_path, r)
    assert not marker.exists(), "a dependency's build ran on the host"
    st = stage(tmp_path)
    assert p.returncode == 0 and st["first_bad"]["ref"] == "1.4", p.stdout + p.stderr
    skipped = [pr for pr in st["probes"] if pr["verdict"] == "skip"]
    assert all(pr["candidate"]["ref"] == "1.2" for pr in skipped)


def test_the_same_file_name_on_another_index_is_another_environment(httpserver: HTTPServer, tmp_path: Path) -> None:
    """An index without hashes, and a file re-uploaded under its name: environments are keyed by content."""
    from bisectbot.run.envs import release_env

    envs = []
    for answer in (42, 41):
        name, data = wheel("toypkg", "1.2", {"toypkg/__init__.py": f"def answer():\n    return {answer}\n"})
        w = tmp_path / str(answer) / name
        w.parent.mkdir()
        w.write_bytes(data)
        envs.append(release_env(w, hashlib.sha256(data).hexdigest(), "toypkg", "1.2", tmp_path / "cache",
                                index_url=None, timeout_s=120)[0])
    assert envs[0] != envs[1]
