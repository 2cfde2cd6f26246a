"""Child-process targets for the runner tests (importable by ``spawn`` children)."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def run_and_get_killed(image: str, cmd: list[str], q) -> None:
    from bisectbot.run.container import server_container
    from bisectbot.runner_profile import load_profile

    try:
        with server_container(image, cmd, load_profile("cpu"), health_timeout_s=60) as srv:
            q.put(srv.meta["container"])
            time.sleep(120)
    except KeyboardInterrupt:
        pass


def hold_slot(lock_dir: str, slots: list[str], ready, release) -> None:
    from bisectbot.slots import gpu_slot

    with gpu_slot(slots, lock_dir=Path(lock_dir)) as s:
        ready.put(s)
        release.get(timeout=30)


def try_lock(d: str) -> None:
    from bisectbot.slots import LockTimeout, file_lock

    try:
        with file_lock("build", lock_dir=Path(d), timeout_s=0.3, poll_s=0.05):
            sys.exit(0)
    except LockTimeout:
        sys.exit(7)
