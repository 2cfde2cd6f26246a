"""Class 10 of issue 13: ``report render`` on a malformed result file is a clear error, exit 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.bisect.conftest import run_cli
from tests.report.report_helpers import make_result

GOOD = make_result().to_dict()


def _mutate(path: str, value) -> dict:
    data = copy.deepcopy(GOOD)
    cur = data
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    last = parts[-1]
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return data


CASES = {
    # raw bytes of the file
    "empty": b"",
    "not-json": b"{not json",
    "truncated": json.dumps(GOOD).encode()[:300],
    "non-utf8": b'{"recipe": "\xff\xfe"}',
    "a-list": b"[1, 2, 3]",
    "deep-nesting": b"[" * 100000 + b"]" * 100000,
    "deep-object": b'{"result": ' + b'{"a": ' * 50000 + b"1" + b"}" * 50001,
    # wrong types where the renderer expects structure
    "stages-a-string": json.dumps(_mutate("stages", "oops")).encode(),
    "stage-a-list": json.dumps(_mutate("stages.0", [1, 2])).encode(),
    "verdict-unknown": json.dumps(_mutate("stages.1.probes.0.verdict", "maybe")).encode(),
    "threshold-text": json.dumps(_mutate("stages.1.probes.0.threshold", "abc")).encode(),
    "candidate-a-list": json.dumps(_mutate("stages.1.probes.0.candidate", ["x"])).encode(),
    "tp-text": json.dumps(_mutate("tp", "four")).encode(),
    "environment-a-list": json.dumps(_mutate("environment", ["x"])).encode(),
    "status-missing": json.dumps({k: v for k, v in GOOD.items() if k != "status"}).encode(),
    "table-rows-strings": json.dumps(_mutate("stages.1.probes.0.table", ["row", 3])).encode(),
    "notes-number": json.dumps(_mutate("notes", 5)).encode(),
    "nightly-wrapper-broken": json.dumps({"result": GOOD, "nightly": {"probes": "x"}}).encode(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_result_is_exit_2_with_a_clear_line(tmp_path: Path, name: str) -> None:
    f = tmp_path / "result.json"
    f.write_bytes(CASES[name])
    p = run_cli("report", "render", str(f), "--out", str(tmp_path / "out"))
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    assert "result.json" in p.stderr and p.stderr.startswith("bisectbot: error:"), p.stderr


def test_table_row_values_of_wrong_type_do_not_crash(tmp_path: Path) -> None:
    # found while testing: a table row whose fields are of the wrong type reaches the renderer
    f = tmp_path / "result.json"
    f.write_text(json.dumps(_mutate("stages.1.probes.0.table", [{"size": "huge", "outcome": 7, "reasons": "x"}])))
    p = run_cli("report", "render", str(f), "--out", str(tmp_path / "out"))
    assert p.returncode in (0, 2), p.stderr
    assert "Traceback" not in p.stderr


def test_a_valid_result_still_renders(tmp_path: Path) -> None:
    f = tmp_path / "result.json"
    f.write_text(json.dumps(GOOD))
    p = run_cli("report", "render", str(f), "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.md").is_file()


# found by the hostile review: inputs that are not regular files, or JSON Python refuses to convert
def test_result_with_a_100000_digit_integer_is_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "result.json"
    f.write_text('{"recipe": "x", "tp": ' + "9" * 100000 + "}")
    p = run_cli("report", "render", str(f), "--out", str(tmp_path / "out"))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_result_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    import os

    if kind == "fifo":
        f = tmp_path / "result.json"
        os.mkfifo(f)  # nobody writes: opening it for reading would block forever
    elif kind == "dev-zero":
        f = Path("/dev/zero")  # endless: reading it would exhaust memory
    else:
        f = tmp_path
    p = run_cli("report", "render", str(f), "--out", str(tmp_path / "out"), timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "not a regular file" in p.stderr or "is a directory" in p.stderr, p.stderr[-2000:]
