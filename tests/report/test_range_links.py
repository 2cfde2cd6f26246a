"""Issue 25, input 4: the range is linked. The report and the issue link the GitHub compare view of
the final range (last good ... first bad, full SHAs), the first bad commit and, when the culprit is
blamed and its subject names a pull request (``… (#NNNN)``, GitHub's squash-merge subject), that
pull request; off GitHub nothing is linked. (The nightly report's ``nightlies diff`` table is
tested on a real container run: tests/report/test_evidence.py, the nightly kind.)"""

from __future__ import annotations

from bisectbot.models import Status
from bisectbot.report.issue import render_issue
from bisectbot.report.links import compare_url, github_repo, pull_request
from bisectbot.report.markdown import render_markdown
from tests.report.report_helpers import make_result


def _result(repo: str, status: Status = Status.CULPRIT, subject: str = "[ROCm] chunk the indexer prefill (#31415)"):
    res = make_result(status=status, n_probes=8)
    fb = res.final.first_bad
    fb.meta["subject"] = subject
    res.reproduction = {"repos": {"vllm": repo}}
    return res, res.final.last_good.ref, fb.ref


def test_compare_view_commit_and_pull_request_are_linked() -> None:
    res, lg, fb = _result("https://github.com/vllm-project/vllm.git")
    for text in (render_markdown(res), render_issue(res)[1]):
        assert f"[{lg[:12]}...{fb[:12]}](https://github.com/vllm-project/vllm/compare/{lg}...{fb})" in text, text[:2500]
        assert f"(https://github.com/vllm-project/vllm/commit/{fb})" in text
        assert "pull request: [#31415](https://github.com/vllm-project/vllm/pull/31415)" in text


def test_no_pull_request_link_when_nobody_is_blamed_and_no_links_off_github() -> None:
    res, lg, fb = _result("https://github.com/vllm-project/vllm.git", status=Status.INCONCLUSIVE)
    text = render_issue(res)[1]
    assert "/pull/31415" not in text  # a best guess is not linked to anyone's pull request
    res, lg, fb = _result("/srv/mirrors/vllm")
    text = render_markdown(res)
    assert "/compare/" not in text and "pull request:" not in text


def test_link_helpers() -> None:
    assert github_repo("git@github.com:ROCm/aiter.git") == "ROCm/aiter"
    assert github_repo("https://gitlab.com/a/b") is None
    assert compare_url("https://github.com/a/b", "HEAD~80", "main") is None  # never a symbolic ref
    assert pull_request("[Misc] x (#12) y") is None and pull_request("[Misc] x (#12)") == 12
