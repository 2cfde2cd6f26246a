"""Helpers of the patch-stack tests (imported by the tests; conftest puts this directory on sys.path).

``AITER_TAG_FORM`` / ``AITER_MAIN_FORM`` reproduce the *structure* of
``deepgemm_fp8_paged_mqa_logits_stage1`` in ``aiter/ops/triton/attention/pa_mqa_logits.py``
at aiter tag v0.1.10.post3 and at main e4048607a5 (2026-08-22): only the few lines the
real diff touches or uses as context, with stub bodies so the function can run on
plain Python objects. The suite cannot reach GitHub; the real patch was verified
against the real files with ``patch --dry-run`` and ``patches/check_releases.py aiter``.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

AITER_REL = "aiter/ops/triton/attention/pa_mqa_logits.py"

AITER_TAG_FORM = textwrap.dedent('''\
    def deepgemm_fp8_paged_mqa_logits_stage1(q_fp8, kv_cache_fp8, kv_indices, ChunkQ=64, TotalCuCount=80, WavePerEU=2):
        batch_size, next_n, heads, hidden_dim = q_fp8.size()
        _, max_blk_len = kv_indices.size()

        TileQCount = batch_size * next_n * (heads // ChunkQ)
        SplitKV = (max(1, TotalCuCount // TileQCount) + 4) // 5 * 5 * WavePerEU

        kv_cache_fp8, kv_cache_scale = (
            kv_cache_fp8[..., :hidden_dim],
            kv_cache_fp8[..., hidden_dim:],
        )
        assert heads % ChunkQ == 0
        return {"ChunkQ": ChunkQ, "TileQCount": TileQCount, "SplitKV": SplitKV}
''')

AITER_MAIN_FORM = textwrap.dedent('''\
    def deepgemm_fp8_paged_mqa_logits_stage1(q_fp8, kv_cache_fp8, kv_indices, ChunkQ=64, TotalCuCount=80, WavePerEU=2):
        batch_size, next_n, heads, hidden_dim = q_fp8.size()
        num_blocks, block_size, num_kv_heads, packed_dim = kv_cache_fp8.size()
        assert packed_dim == hidden_dim + 4, (
            "The stage1 kernel expects one fp32 scale after each packed FP8 token; "
            f"got q hidden_dim={hidden_dim} and packed KV dim={packed_dim}."
        )

        TileQCount = batch_size * next_n * (heads // ChunkQ)
        SplitKV = (max(1, TotalCuCount // TileQCount) + 4) // 5 * 5 * WavePerEU

        packed_kv_cache = kv_cache_fp8.view(num_blocks, -1)
        assert heads % ChunkQ == 0
        return {"ChunkQ": ChunkQ, "TileQCount": TileQCount, "SplitKV": SplitKV}
''')


class Shaped:
    """Stand-in for a tensor: ``size()``, ``view()`` and slicing are all this needs."""

    def __init__(self, *shape: int):
        self.shape = shape

    def size(self) -> tuple[int, ...]:
        return self.shape

    def view(self, *a: int) -> Shaped:
        return self

    def __getitem__(self, k: object) -> Shaped:
        return self


def run_stage1(source: str, heads: int) -> dict:
    """Execute the fixture's stage-1 wrapper with ``heads`` query heads per rank (hidden 128)."""
    ns: dict = {}
    exec(compile(source, "pa_mqa_logits.py", "exec"), ns)
    return ns["deepgemm_fp8_paged_mqa_logits_stage1"](Shaped(2, 1, heads, 128), Shaped(10, 1, 1, 132), Shaped(2, 7))


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (relative path -> bytes), for byte-identity checks."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
