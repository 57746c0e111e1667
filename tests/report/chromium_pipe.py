"""Headless Chromium driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``: JSON messages
ended by a NUL byte, Chromium reading on its fd 3 and writing on its fd 4), with no library: what a test needs
to click, drag and choose on a page the way a user does, then read what the page's scripts drew."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any


class ChromiumPage:
    """One page in a headless Chromium: `evaluate` JavaScript, `drag` the mouse, `wait_for` a condition."""

    def __init__(self, browser: str, url: str, *, width: int = 1400, height: int = 1000) -> None:
        to_chromium_read, self._to_chromium = os.pipe()
        self._from_chromium, from_chromium_write = os.pipe()
        command = (
            f'exec "$0" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions '
            f"--remote-debugging-pipe --window-size={width},{height} about:blank "
            f"3<&{to_chromium_read} 4>&{from_chromium_write}"
        )
        self._process = subprocess.Popen(
            ["bash", "-c", command, browser],
            pass_fds=(to_chromium_read, from_chromium_write),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chromium_read)
        os.close(from_chromium_write)
        self._buffer = b""
        self._next_id = 0
        target = self._call("Target.createTarget", {"url": url})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        # the new target shows about:blank (complete at once) before it navigates: wait for the page itself
        address = json.dumps(url.split("#")[0])  # the page may rewrite its fragment as it starts
        self.wait_for(f"location.href.split('#')[0] === {address} && document.readyState === 'complete'")

    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chromium, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chromium], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_chromium, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def _call(
        self, method: str, params: dict[str, Any], *, timeout: float = 60.0, browser: bool = False
    ) -> dict[str, Any]:
        """Send ``method`` to the page's session (``browser``: to the browser itself) and wait for its answer."""
        wanted = self._send(method, params, None if browser else getattr(self, "_session", None))
        while True:
            message = self._receive(timeout)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (JSON-serialisable; a promise is awaited); a thrown error
        raises."""
        found = self._call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 30.0) -> None:
        """Until ``condition`` holds in the page (an error evaluating it, as on a page still loading, counts as
        not yet)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.evaluate(f"Boolean({condition})"):
                    return
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never met {condition}")
            time.sleep(0.05)

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 5) -> None:
        """Press the left button at ``start``, move to ``end`` in ``steps``, release (page coordinates)."""
        (x0, y0), (x1, y1) = start, end
        self._call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, "button": "left", "clickCount": 1})  # fmt: skip
        for i in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps
            self._call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "left"})
        self._call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, "button": "left", "clickCount": 1})  # fmt: skip

    def choose(self, select_id: str, value: str) -> None:
        """Choose ``value`` in the ``<select id=select_id>`` as a user does (the page hears its change)."""
        self.evaluate(
            f"(() => {{ const s = document.getElementById({json.dumps(select_id)}); s.value = {json.dumps(value)};"
            " s.dispatchEvent(new Event('change')); })()"
        )

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):  # it may close before it answers
            self._call("Browser.close", {}, timeout=10, browser=True)
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_chromium)
        os.close(self._from_chromium)

    def __enter__(self) -> ChromiumPage:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def page_url(path: Path, fragment: str = "") -> str:
    return path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
