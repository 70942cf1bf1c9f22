"""Push a sweep's live results to the lab's Pushgateway. Best effort: a failure logs one warning line, never
raises and never holds a sweep up for long (short timeouts, then no new attempt for RETRY_S)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from prometheus_client.exposition import delete_from_gateway, push_to_gateway

from lab import config, terminal
from lab.observe.exposition import Family, registry
from lab.observe.sweep_metrics import JOB, GroupKey, SweepState
from lab.plan.plan import PlannedRun
from lab.results.schema import RunRecord

TIMEOUT_S = 1.0
PROBE_TIMEOUT_S = 0.5
RETRY_S = 30.0
#: At most one push per this many seconds while runs come in (a sweep of small objects finishes ten runs a second,
#: and a push of a sweep's groups takes ~50 ms between two runs: every 3 s that is under 2 % of the sweep's span, the
#: live panels lag by at most 3 s). The sweep's start and end are always pushed at once.
PUSH_INTERVAL_S = 3.0


class Pushgateway:
    """PUT/DELETE metric groups with prometheus_client (it encodes the grouping key: base64 where a value needs
    it); finding an address that answers and listing the groups are plain GETs (prometheus_client has neither)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.url: str | None = None

    def _gateway(self) -> str:
        if self.url is None:
            self.url = self._probe()
        return self.url

    def _probe(self) -> str:
        for url in self.urls:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=PROBE_TIMEOUT_S):
                    return url
            except (OSError, urllib.error.URLError):
                continue
        raise OSError(f"no Pushgateway answers at {' or '.join(self.urls)}")

    def _call(self, action: Callable[[str], None]) -> None:
        try:
            action(self._gateway())
        except (OSError, urllib.error.URLError):
            self.url = None  # probe again next time (the other address may answer)
            raise

    def put(self, labels: dict[str, str], families: Sequence[Family]) -> None:
        job, key = labels["job"], {k: v for k, v in labels.items() if k != "job"}
        self._call(lambda url: push_to_gateway(url, job=job, registry=registry(families), grouping_key=key,
                                               timeout=TIMEOUT_S))

    def delete(self, labels: dict[str, str]) -> None:
        job, key = labels["job"], {k: v for k, v in labels.items() if k != "job"}
        self._call(lambda url: delete_from_gateway(url, job=job, grouping_key=key, timeout=TIMEOUT_S))

    def groups(self) -> list[dict[str, str]]:
        found: list[dict[str, str]] = []

        def get(url: str) -> None:
            with urllib.request.urlopen(url + "/api/v1/metrics", timeout=TIMEOUT_S) as resp:
                data = json.loads(resp.read())
            found.extend(g.get("labels", {}) for g in data.get("data", []))

        self._call(get)
        return found


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
        self.pushed_at = -PUSH_INTERVAL_S

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
        if time.monotonic() - self.pushed_at >= PUSH_INTERVAL_S:
            self.flush()

    def finish(self, complete: bool) -> None:
        self.state.status = "complete" if complete else "interrupted"
        self.dirty.add(None)
        self.retry_at = 0.0
        self.flush()

    def flush(self) -> None:
        self.pushed_at = time.monotonic()
        self._attempt(self._push_dirty)

    def _push_dirty(self, gw: Pushgateway) -> None:
        for key in sorted(self.dirty, key=lambda k: (k is None, k or (0, "", "", ""))):
            families = self.state.sweep_families() if key is None else self.state.point_families(key)
            gw.put(self.state.grouping_key(key), families)
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
