"""Builders of realistic results for the report tests (plain data, no I/O)."""

from __future__ import annotations

from bisectbot.models import Candidate, CandidateKind, ProbeResult, RunResult, StageResult, Status, Verdict


def nightly(i: int, verdict: Verdict, thr: tuple[int | None, int | None] | None) -> ProbeResult:
    c = Candidate(CandidateKind.NIGHTLY, f"sha256:{i:064x}", label=f"nightly_main_202604{i:02d}", component="image")
    return ProbeResult(candidate=c, verdict=verdict, threshold=thr, duration_s=600.0 + i,
                       reason="garbage above threshold" if verdict == Verdict.BAD else "")


def commit(i: int) -> Candidate:
    sha = f"{i:02x}" * 20
    return Candidate(CandidateKind.COMMIT, sha, label=f"{sha[:9]}", component="vllm",
                     meta={"subject": f"[Kernel] change number {i}", "author_login": f"dev{i}",
                           "url": f"https://github.com/vllm-project/vllm/commit/{sha}"})


def make_result(*, status: Status = Status.CULPRIT, confidence: float = 0.995, flags: list[str] | None = None,
                reply: str = "The answer is 4.", culprit: int = 5, recipe: str = "glm51-prefill",
                n_probes: int = 4, log_paths: list[str] | None = None) -> RunResult:
    nightlies = [nightly(1, Verdict.GOOD, (32000, None)), nightly(2, Verdict.BAD, (20480, 20992))]
    s1 = StageResult(name="nightlies", component="image", status=Status.CULPRIT, candidates=[p.candidate for p in nightlies],
                     probes=nightlies, last_good=nightlies[0].candidate, first_bad=nightlies[1].candidate,
                     culprits=[nightlies[1].candidate], confidence=0.99)
    commits = [commit(i) for i in range(1, 9)]
    probes = []
    for k in range(n_probes):
        i = (k % 8) + 1
        bad = i >= culprit
        probes.append(ProbeResult(
            candidate=commits[i - 1], verdict=Verdict.BAD if bad else Verdict.GOOD,
            threshold=(20480, 20992) if bad else (32000, None), duration_s=412.5,
            reason="GARBAGE: unique-word ratio 0.03 at 24000 tokens" if bad else "",
            table=[{"size": 24000, "outcome": "GARBAGE" if bad else "OK", "reasons": ["unique_ratio"],
                    "reply": reply if bad else "The answer is 4."}],
            log_paths=list(log_paths or []),
        ))
    culprits = [commits[culprit - 1]] if status == Status.CULPRIT else commits[culprit - 2:culprit]
    s2 = StageResult(name="vllm commits", component="vllm", status=status, candidates=commits, probes=probes,
                     last_good=commits[culprit - 2], first_bad=commits[culprit - 1], culprits=culprits,
                     confidence=confidence, flags=list(flags or []))
    return RunResult(
        recipe=recipe, kind="regression", status=status, stages=[s1, s2], model="zai-org/GLM-5.1-FP8", tp=8,
        runner="mi355x", regress="garbage",
        environment={"image": "rocm/vllm-dev:nightly_main_20260402", "digest": "sha256:" + "ab" * 32,
                     "vllm": "0.20.1rc1.dev159+ge6ff3e9c8.rocm721", "aiter": "0.1.12", "torch": "2.10.0+git8514f05",
                     "rocm": "7.2.1", "gpu_arch": "gfx950"},
        patch_stack=[{"id": "sparse-mla-workspace", "status": "applied"}, {"id": "aiter-chunkq", "status": "upstream"}],
        triage={"VLLM_ROCM_USE_AITER_MLA=0": "good", "--enforce-eager": "bad"},
        reproduce="bisectbot run recipes/glm51.yaml --good nightly_main_20260401 --bad nightly_main_20260402",
        notes=["verified: culprit bad, parent good"], session_id="s-20260402-01",
    )


TOKEN = "ghp_SECRETtoken1234567890abcdefghijklmnop"
REPO = "octo-org/vllm"


def github_client(target):
    """A ``GitHubClient`` for ``target`` with ``TOKEN`` and no pacing (tests against the fake GitHub)."""
    from bisectbot.report.github import GitHubClient

    return GitHubClient(target, TOKEN, seconds_between_requests=0, seconds_between_writes=0, max_wait_s=5,
                        backoff_factor=0.05)
