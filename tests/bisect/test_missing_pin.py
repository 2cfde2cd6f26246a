"""A pinned ref its component's repository lacks (issue 35, item 5), through the installed ``bisectbot run``.

vLLM commits pin aiter by ``ARG AITER_BRANCH`` in ``docker/Dockerfile.rocm_base``; the configured aiter
clone lacks the tag some commits pin (its tags were never fetched) and its HEAD is a good commit. On
main each such candidate ran with aiter's HEAD, a log line said so, and the run ended "no-regression:
the bad end is not bad". Now: at an end, exit 2 naming file, pin and repository; inside the range, a
skip with that text; never no-regression, never a blamed culprit.
"""

from __future__ import annotations

from pathlib import Path

from tests.bisect.test_pin_descent import DOCKERFILE, NEW_TAG, aiter_repo, commit, recipe, run, vllm_repo

MISSING = "v0.1.23"  # a tag the aiter clone lacks


def aiter_with_good_head(kit, path: Path) -> list[str]:
    """aiter a0..a9 (a6 on bad, v0.1.22 at a9) whose HEAD is the good a5: what a candidate gets when its pin
    cannot be resolved and the runner falls back to the clone's default."""
    shas = aiter_repo(kit, path)
    kit.git(path, "checkout", "-q", "-b", "stable", shas[5])
    return shas


def test_the_bad_end_pins_a_missing_tag_is_bad_input(tmp_path, kit, starts_file) -> None:
    aiter_with_good_head(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm", new_aiter=MISSING)
    p, res, _ = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[9])
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "no-regression" not in p.stdout + p.stderr
    err = p.stderr
    assert f"the bad end {v[9][:12]}" in err or "the bad end" in err, err
    assert f"pins aiter '{MISSING}' in docker/Dockerfile.rocm_base" in err, err
    assert f"the repository {tmp_path / 'aiter'} lacks" in err and "fetch --tags" in err, err
    assert res == {}  # no report: nothing was bisected
    assert kit.read_starts(starts_file) == []  # the bad end never ran with another aiter than it pins


def test_inside_the_range_a_missing_pin_is_a_skip_naming_it(tmp_path, kit, starts_file) -> None:
    a = aiter_with_good_head(kit, tmp_path / "aiter")
    v = vllm_repo(kit, tmp_path / "vllm", new_aiter=MISSING)  # v5..v9 pin the missing tag
    v.append(commit(kit, tmp_path / "vllm", "[ROCm] Bump AITER again (#56999)",
                    {"docker/Dockerfile.rocm_base": DOCKERFILE.format(aiter=NEW_TAG, mori="2d02c6a9"),
                     "v.txt": "v10\n"}))
    assert a  # v10 pins v0.1.22 = a9, which is bad
    p, res, md = run(kit, tmp_path, recipe(tmp_path, tmp_path / "vllm", tmp_path / "aiter"), v[0], v[10])
    assert p.returncode == 3, p.stdout + p.stderr
    assert res["status"] != "no-regression" and "will not blame" in " ".join(res["notes"])
    st = res["stages"][0]
    skipped = [x for x in st["probes"] if x["verdict"] == "skip"]
    assert skipped, st["probes"]
    for x in skipped:
        assert x["candidate"]["ref"] in v[5:10]
        assert x["reason"].startswith("missing pin: ")
        assert f"pins aiter '{MISSING}' in docker/Dockerfile.rocm_base" in x["reason"]
        assert str(tmp_path / "aiter") in x["reason"]
    assert all(x["verdict"] != "good" for x in st["probes"] if x["candidate"]["ref"] in v[5:10])
    assert res["status"] in ("range", "inconclusive") and v[10] in [c["ref"] for c in st["culprits"]]
