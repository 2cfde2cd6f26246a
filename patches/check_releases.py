#!/usr/bin/env python3
"""Check every variant choice of the stack over real releases (maintainer tool, not a test).

    python patches/check_releases.py vllm --min 0.19.0            # vLLM sdists from the index
    python patches/check_releases.py vllm --min 0.19.0 --no-version   # pick variants by content only
    python patches/check_releases.py aiter --git /path/to/aiter.git  # aiter tags + main of a git dir

Prints one line per release: the state and variant of every patch of that package.
Exit 1 if a required patch conflicts anywhere. Downloads are cached (see
bisectbot.sources.releases); each sdist contributes only the patched files.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from packaging.version import Version  # noqa: E402

from bisectbot.patches import State, check_stack, load_stack  # noqa: E402
from bisectbot.sources import releases  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("package", choices=["vllm", "aiter"])
    ap.add_argument("--min", default="0.0")
    ap.add_argument("--no-version", action="store_true", help="do not tell the checker the version")
    ap.add_argument("--git", help="aiter: bare git dir; checks tags v0.1.10* and later, and main")
    ap.add_argument("--refs", nargs="*", help="aiter: refs to check instead of the tag list")
    args = ap.parse_args()
    stack = load_stack()
    ids = [p.id for p in stack.patches if p.package == args.package]
    members = sorted({f"{p.package}/{p.path}" for p in stack.patches if p.package == args.package})
    bad = False
    rows: list[tuple[str, list]] = []
    if args.package == "vllm":
        for rel in releases.list_releases("vllm"):
            if Version(rel.version) < Version(args.min) or rel.sdist is None or Version(rel.version).is_prerelease:
                continue
            with tempfile.TemporaryDirectory() as d:
                root = releases.extract_sdist(releases.download(rel.sdist), Path(d), members)
                vers = {} if args.no_version else {"vllm": rel.version}
                if args.no_version:
                    (root / "PKG-INFO").unlink(missing_ok=True)
                rows.append((rel.version, check_stack(stack, ids, root, vers)))
    else:
        refs = args.refs or [t for t in subprocess.run(
            ["git", "--git-dir", args.git, "tag", "--sort=creatordate"], capture_output=True, text=True,
            check=True).stdout.split() if t.startswith("v0.1.") and Version(t[1:].split("-")[0]) >= Version(args.min)]
        refs = refs + ([] if args.refs else ["main"])
        for ref in refs:
            with tempfile.TemporaryDirectory() as d:
                ok = True
                for m in members:
                    r = subprocess.run(["git", "--git-dir", args.git, "show", f"{ref}:{m}"], capture_output=True)
                    if r.returncode:
                        ok = False
                        break
                    (Path(d) / m).parent.mkdir(parents=True, exist_ok=True)
                    (Path(d) / m).write_bytes(r.stdout)
                if not ok:
                    print(f"{ref:16} file absent")
                    continue
                v = ref[1:].split("-")[0] if ref.startswith("v") and not args.no_version else None
                rows.append((ref, check_stack(stack, ids, Path(d), {"aiter": v} if v else {})))
    for name, sts in rows:
        cells = []
        for s in sts:
            cells.append(f"{s.id}: {s.label}" + (f" ({s.detail})" if s.state is State.UPSTREAM else ""))
            bad |= s.required and s.state is State.CONFLICT
        print(f"{name:16} " + " | ".join(cells))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
