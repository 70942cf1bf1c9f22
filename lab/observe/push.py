"""Push a sweep's live results to the lab's Pushgateway. Best effort: a failure logs one warning line, never
raises and never holds a sweep up for long (short timeouts, then no new attempt for RETRY_S)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from lab import config, terminal
from lab.observe.sweep_metrics import JOB, GroupKey, SweepState
from lab.results.schema import RunRecord
from lab.sweep.plan import PlannedRun

TIMEOUT_S = 1.0
PROBE_TIMEOUT_S = 0.5
RETRY_S = 30.0


def group_path(labels: dict[str, str]) -> str:
    """/metrics/job/<job>/<label>@base64/<value>...: every value base64url-encoded, so any text is safe."""
    parts = ["metrics", "job", labels["job"]]
    for k, v in labels.items():
        if k != "job":
            parts += [f"{k}@base64", base64.urlsafe_b64encode(v.encode()).decode() or "="]
    return "/" + "/".join(parts)


class Pushgateway:
    """A tiny HTTP client: PUT/DELETE metric groups, list groups."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.url: str | None = None

    def _request(self, method: str, path: str, body: bytes | None = None, timeout: float = TIMEOUT_S) -> bytes:
        if self.url is None:
            self.url = self._probe()
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers={"Content-Type": "text/plain; version=0.0.4"} if body else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.read()
        except (OSError, urllib.error.URLError):
            self.url = None  # probe again next time (the other address may answer)
            raise

    def _probe(self) -> str:
        for url in self.urls:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=PROBE_TIMEOUT_S):
                    return url
            except (OSError, urllib.error.URLError):
                continue
        raise OSError(f"no Pushgateway answers at {' or '.join(self.urls)}")

    def put(self, labels: dict[str, str], text: str) -> None:
        self._request("PUT", group_path(labels), text.encode())

    def delete(self, labels: dict[str, str]) -> None:
        self._request("DELETE", group_path(labels))

    def groups(self) -> list[dict[str, str]]:
        data = json.loads(self._request("GET", "/api/v1/metrics"))
        return [g.get("labels", {}) for g in data.get("data", [])]


_Action = Callable[[Pushgateway], None]


class Publisher:
    """Keeps a sweep's aggregate state and pushes the groups a run changed (and any left over from a failure)."""

    def __init__(self, state: SweepState, gateway: Pushgateway | None) -> None:
        self.state = state
        self.gateway = gateway
        self.dirty: set[GroupKey | None] = set()  # None = the sweep's own group
        self.todo: list[PlannedRun] = []
        self.warned = False
        self.retry_at = 0.0

    @classmethod
    def for_sweep(cls, sweep: str, planned: int, x_name: str, shaper: str = "") -> Publisher:
        urls = config.pushgateway_urls()
        return cls(SweepState(sweep, planned, x_name, shaper), Pushgateway(urls) if urls else None)

    def begin(self, previous: Sequence[RunRecord], todo: Sequence[PlannedRun], fresh: bool) -> None:
        """Start (fresh: forget this sweep's groups from an earlier execution) or resume with the kept records."""
        if fresh:
            self._attempt(self._forget_old)
        for r in previous:
            self.dirty.add(self.state.add(r))
        self.todo = list(todo)
        self.state.current = self.todo[0] if self.todo else None
        self.dirty.add(None)
        self.flush()

    def record(self, rec: RunRecord) -> None:
        self.dirty.add(self.state.add(rec))
        self.dirty.add(None)
        if self.todo:
            self.todo.pop(0)
            if self.todo:
                self.state.current = self.todo[0]
        self.flush()

    def finish(self, complete: bool) -> None:
        self.state.status = "complete" if complete else "interrupted"
        self.dirty.add(None)
        self.retry_at = 0.0
        self.flush()

    def flush(self) -> None:
        self._attempt(self._push_dirty)

    def _push_dirty(self, gw: Pushgateway) -> None:
        for key in sorted(self.dirty, key=lambda k: (k is None, k or (0, "", "", ""))):
            text = self.state.sweep_text() if key is None else self.state.point_text(key)
            gw.put(self.state.grouping_key(key), text)
            self.dirty.discard(key)

    def _forget_old(self, gw: Pushgateway) -> None:
        for labels in gw.groups():
            if labels.get("job") == JOB and labels.get("sweep") == self.state.sweep:
                gw.delete(labels)

    def _attempt(self, action: _Action) -> None:
        if self.gateway is None or time.monotonic() < self.retry_at:
            return
        try:
            action(self.gateway)
        except (OSError, ValueError) as e:
            self.retry_at = time.monotonic() + RETRY_S
            if not self.warned:
                self.warned = True
                terminal.warning(f"live sweep results not published ({e}); the sweep goes on, results/ has "
                                 f"everything")
