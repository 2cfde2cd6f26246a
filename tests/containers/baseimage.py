"""A Python base image made locally (Docker Hub is unreachable in CI).

``ensure_base_image()`` returns ``bisectbot-test/base:bookworm``, creating it when
missing with ``debootstrap --variant=minbase --include=python3 bookworm`` and
``docker import`` (about 40-60 s once; later runs reuse the image). A lock file
serialises concurrent creators.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BASE_IMAGE = "bisectbot-test/base:bookworm"
MIRROR = os.environ.get("BISECTBOT_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def ensure_base_image(ref: str = BASE_IMAGE) -> str:
    """Return ``ref``, building it with debootstrap + docker import when absent.

    Raises ``RuntimeError`` with debootstrap's last output lines when the build fails.
    """
    if image_exists(ref):
        return ref
    lock = Path(tempfile.gettempdir()) / "bisectbot-base-image.lock"
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if image_exists(ref):
            return ref
        if not shutil.which("debootstrap"):
            raise RuntimeError("debootstrap not installed (apt-get install debootstrap)")
        priv = _privilege()
        root = Path(tempfile.mkdtemp(prefix="bisectbot-rootfs-"))
        try:
            p = subprocess.run(
                [*priv, "debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(root), MIRROR],
                capture_output=True, text=True,
            )
            if p.returncode != 0:
                tail = "\n".join((p.stdout + p.stderr).splitlines()[-20:])
                raise RuntimeError(f"debootstrap failed (exit {p.returncode}):\n{tail}")
            # Trim what a test image never needs (docs, man pages, apt lists): smaller import.
            subs = ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")
            subprocess.run([*priv, "rm", "-rf", *[str(root / sub) for sub in subs]], capture_output=True)
            tar = subprocess.Popen([*priv, "tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            imp = subprocess.run(
                ["docker", "import", "-c", 'CMD ["python3"]', "-", ref],
                stdin=tar.stdout, capture_output=True, text=True,
            )
            tar.wait()
            if imp.returncode != 0:
                raise RuntimeError(f"docker import failed: {imp.stderr.strip()}")
        finally:
            subprocess.run([*priv, "rm", "-rf", str(root)], capture_output=True)
    return ref


def _privilege() -> list[str]:
    """``[]`` as root, ``["sudo", "-n"]`` where password-less sudo works (CI runners); else an error:
    debootstrap needs root."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise RuntimeError("building the test base image needs root (debootstrap): run as root or with "
                       "password-less sudo, or create bisectbot-test/base:bookworm once by hand")
