"""A real headless Chromium driven over W3C WebDriver with plain HTTP requests (Debian's
``chromium`` + ``chromium-driver``; no selenium, no driver download).

``Browser.open(url)`` loads a page; ``console()`` returns the browser log entries since the last
call (console errors, failed resource loads, CSP violations: all ``SEVERE``); ``js(script, *args)``
runs a script in the page and returns its value; ``screenshot(path)`` writes a PNG of the
viewport; ``full_screenshot(path)`` resizes the window to the page first.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import requests

CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1000",
               "--hide-scrollbars"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binaries() -> tuple[str, str]:
    """``(chromium, chromedriver)`` paths; fails the test (never skips: CI installs them) when missing."""
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        pytest.fail("chromium / chromedriver not installed: apt-get install chromium chromium-driver "
                    "(scripts/test-all.sh does)")
    return chrome, driver


class Browser:
    def __init__(self) -> None:
        chrome, driver = find_binaries()
        self.port = _free_port()
        self.profile = tempfile.mkdtemp(prefix="bisectbot-chromium-")
        self.proc = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(self.base + "/status", timeout=2).json()["value"]["ready"]:
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromedriver did not come up")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {"binary": chrome, "args": CHROME_ARGS + [f"--user-data-dir={self.profile}"]}}}}
        r = requests.post(self.base + "/session", json=caps, timeout=120).json()
        if "sessionId" not in r.get("value", {}):
            self.close()
            raise RuntimeError(f"no WebDriver session: {r}")
        self.sid = r["value"]["sessionId"]
        self.version = r["value"]["capabilities"].get("browserVersion", "")

    def _cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        r = requests.request(method, f"{self.base}/session/{self.sid}{path}", json=body, timeout=120)
        data = r.json()
        if r.status_code != 200:
            raise RuntimeError(f"WebDriver {path}: {data}")
        return data.get("value")

    def open(self, url: str) -> None:
        self._cmd("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self._cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def console(self) -> list[dict[str, Any]]:
        return self._cmd("POST", "/se/log", {"type": "browser"}) or []

    def alert_text(self) -> str | None:
        """The text of an open JavaScript dialog, None when there is none."""
        r = requests.get(f"{self.base}/session/{self.sid}/alert/text", timeout=30)
        return r.json()["value"] if r.status_code == 200 else None

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._cmd("GET", "/screenshot")))
        return path

    def full_screenshot(self, path: Path, width: int = 1280, max_height: int = 6000) -> Path:
        h = int(self.js("return Math.ceil(document.documentElement.scrollHeight)") or 1000)
        self._cmd("POST", "/window/rect", {"width": width, "height": min(max_height, h + 140)})
        try:
            return self.screenshot(path)
        finally:
            self._cmd("POST", "/window/rect", {"width": 1280, "height": 1000})

    def close(self) -> None:
        try:
            if getattr(self, "sid", None):
                requests.delete(f"{self.base}/session/{self.sid}", timeout=30)
        except requests.RequestException:
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
        shutil.rmtree(self.profile, ignore_errors=True)
