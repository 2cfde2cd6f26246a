"""Recipe loading: precise FILE:LINE:COL errors, exit code 2, schema, stable verdict hash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bisectbot.errors import RecipeError
from bisectbot.recipe import load_recipe, parse_recipe

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
name: t1
source:
  kind: registry
  repository: rocm/vllm-dev
"""


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    "text, expected",
    [
        # wrong type: max_tokens must be an integer
        (BASE + "reproducer:\n  max_tokens: lots\n", ":6:15: reproducer.max_tokens: Input should be a valid integer"),
        # unknown key: points at the key itself
        (BASE + "  colour: red\n", ":5:3: source.colour: unknown field"),
        # bad indent: the YAML parser's own position
        ("name: t1\nsource:\n  kind: registry\n   repository: x\n", ":4:14: (yaml): mapping values are not allowed here"),
    ],
    ids=["wrong-type", "unknown-key", "bad-indent"],
)
def test_one_precise_line_and_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(text)
    with pytest.raises(RecipeError) as ei:
        load_recipe(f)
    assert ei.value.problems == [f"{f}{expected}" + ei.value.problems[0].split(expected, 1)[1]]
    assert len(ei.value.problems) == 1
    p = cli("recipe", "validate", str(f))
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{f}{expected}")


def test_every_error_reported(tmp_path: Path) -> None:
    text = BASE + "tp: zero\nregress: {a: 1, b: 2}\nreproducer:\n  sizes: [1000, x]\n"
    with pytest.raises(RecipeError) as ei:
        parse_recipe(text, "r.yaml")
    fields = sorted(p.split(": ")[1] for p in ei.value.problems)
    assert fields == ["regress", "reproducer.sizes[1]", "tp"]


def test_regress_forms() -> None:
    r = parse_recipe(BASE + "regress: {threshold-below: 20000}\n")
    assert (r.regress.mode, r.regress.arg) == ("threshold-below", 20000)
    r = parse_recipe(BASE + "regress: 'patch-upstream: vllm-sparse-mla-workspace'\n")
    assert (r.regress.mode, r.regress.arg) == ("patch-upstream", "vllm-sparse-mla-workspace")
    assert parse_recipe(BASE + "regress: success\n").regress.is_fix
    with pytest.raises(RecipeError, match="needs a token count"):
        parse_recipe(BASE + "regress: {threshold-below: many}\n")
    with pytest.raises(RecipeError, match="regress: regress mode 'patch-conflict' needs a value"):
        parse_recipe(BASE + "regress: patch-conflict\n")


def test_verdict_hash_ignores_report_and_range_only() -> None:
    a = parse_recipe(BASE)
    b = parse_recipe(BASE + "report: {dir: elsewhere}\nbisect: {good: x, bad: y}\ndescription: other\n")
    c = parse_recipe(BASE + "reproducer: {question: 'What is 3+3?'}\n")
    assert a.verdict_hash() == b.verdict_hash()
    assert a.verdict_hash() != c.verdict_hash()
    assert a.verdict_hash() == parse_recipe(BASE).verdict_hash()


def test_shipped_recipes_validate() -> None:
    files = sorted(str(p) for p in (ROOT / "recipes").glob("*.yaml"))
    assert files
    p = cli("recipe", "validate", *files)
    assert p.returncode == 0, p.stderr
    glm = load_recipe(ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml")
    assert (glm.tp, glm.runner, glm.reproducer.max_tokens) == (4, "mi355x", 1000)
    assert glm.source.repository == "rocm/vllm-dev"
    assert min(glm.reproducer.sizes) <= 5000 and max(glm.reproducer.sizes) >= 30000


def test_schema_is_json_schema() -> None:
    p = cli("recipe", "schema")
    assert p.returncode == 0
    schema = json.loads(p.stdout)
    assert schema["title"] == "Recipe"
    assert {"name", "source"} <= set(schema["required"])


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    p = cli("recipe", "validate", str(tmp_path / "nope.yaml"))
    assert p.returncode == 2
    assert "nope.yaml:1:1: (file): cannot read" in p.stderr


def test_unknown_patch_id_located(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE + "patches:\n  - aiter-chunkq-clamp\n  - no-such-patch\n")
    p = cli("recipe", "validate", str(f))
    assert p.returncode == 2
    assert p.stderr.strip().startswith(f"{f}:7:5: patches[1]: unknown patch id 'no-such-patch'")


@pytest.mark.parametrize("text, expected", [
    # issue 41, item 11: a misspelled field names the closest known one, at each depth of the recipe
    ("reproducr: {min_size: 100}\n", "reproducr: unknown field (did you mean 'reproducer'?)"),
    ("server: {comand: [a]}\n", "server.comand: unknown field (did you mean 'command'?)"),
    ("bisect: {goood: a}\n", "bisect.goood: unknown field (did you mean 'good'?)"),
    ("bisect: {components: {vllm: {repo: x, runtime_path: [a]}}}\n",
     "bisect.components.vllm.runtime_path: unknown field (did you mean 'runtime_paths'?)"),
    ("triage: [{name: a, evn: {}}]\n", "triage[0].evn: unknown field (did you mean 'env'?)"),
    ("reproducer: {reference: {candidat: last-good}}\n",
     "reproducer.reference.candidat: unknown field (did you mean 'candidate'?)"),
    # nothing close: the known fields instead of a guess
    ("zzzzqqq: 1\n", "zzzzqqq: unknown field (known: bisect, description, "),
])
def test_an_unknown_field_names_the_closest_known_one(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE + text)
    p = cli("recipe", "validate", str(f))
    assert p.returncode == 2 and expected in p.stderr, p.stderr


def test_a_misspelled_recipe_name_names_the_closest_shipped_one(tmp_path: Path) -> None:
    for typo, near in (("dmeo", "demo"), ("glm51-fp8-sparse-mla-prefil", "glm51-fp8-sparse-mla-prefill")):
        p = cli("recipe", "validate", typo, cwd=tmp_path)
        assert p.returncode == 2 and f"did you mean {near!r}?" in p.stderr, p.stderr
    p = cli("recipe", "validate", "qqqqzzzz", cwd=tmp_path)
    assert p.returncode == 2 and "did you mean" not in p.stderr
