"""The state of every finding of a campaign (open, replayed, flaky), one record per signature.

Files: DIR/state/<sig>.json, written atomically. With ``--redis`` each record is also
a Redis hash (``hybridfuzz:finding:<sig>``, holding the finding's YAML text too), so
``campaign-status`` and ``report`` on any host see the findings of every host.
"""
from __future__ import annotations

import glob
import json
import os
import socket
import time
from dataclasses import asdict, dataclass

from hybridfuzz.campaign.records import FindingState
from hybridfuzz.case import dump_case
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import case_size, filename

REDIS_PREFIX = "hybridfuzz:finding:"
REDIS_INDEX = "hybridfuzz:findings"


@dataclass
class FindingRecord:
    signature: str
    state: FindingState
    path: str  # the YAML file on the host that wrote it
    host: str
    summary: str
    size: list[int]
    t: float  # when the state was last set (epoch)
    text: str = ""  # the YAML (Redis only: for hosts that do not have the file)

    def to_json(self) -> str:
        return json.dumps(dict(asdict(self), state=self.state.value))

    @classmethod
    def from_dict(cls, d: dict) -> FindingRecord:
        return cls(signature=d["signature"], state=FindingState(d["state"]), path=d.get("path", ""), host=d.get("host", ""),
                   summary=d.get("summary", ""), size=list(d.get("size") or []), t=float(d.get("t", 0.0)), text=d.get("text", ""))


class FindingStore:
    def __init__(self, campaign_dir: str, redis_client=None):
        self.dir = os.path.join(campaign_dir, "state")
        self.r = redis_client

    def _path(self, sig: str) -> str:
        return os.path.join(self.dir, filename(sig)[: -len(".yaml")] + ".json")

    def set(self, sig: str, state: FindingState, path: str, case) -> FindingRecord:

        obs = case.observed[-1] if case.observed else None
        rec = FindingRecord(sig, state, path, socket.gethostname(), obs.summary if obs else "", list(case_size(case)), time.time())
        os.makedirs(self.dir, exist_ok=True)
        write_atomic(self._path(sig), rec.to_json())
        if self.r is not None:
            rec.text = dump_case(case)
            self.r.set(REDIS_PREFIX + sig, rec.to_json())
            self.r.sadd(REDIS_INDEX, sig)
        return rec

    def get(self, sig: str) -> FindingState | None:
        rec = self._redis(sig) if self.r is not None else None
        rec = rec or self._file(self._path(sig))
        return rec.state if rec else None

    def all(self) -> dict[str, FindingRecord]:
        """Every record: this host's files, overlaid by Redis (every host) when shared."""
        out = {}
        for path in sorted(glob.glob(os.path.join(self.dir, "*.json"))):
            rec = self._file(path)
            if rec:
                out[rec.signature] = rec
        if self.r is not None:
            for raw in self.r.smembers(REDIS_INDEX):
                sig = raw.decode() if isinstance(raw, bytes) else raw
                rec = self._redis(sig)
                if rec and (sig not in out or rec.t >= out[sig].t):
                    out[sig] = rec
        return out

    def _redis(self, sig: str) -> FindingRecord | None:
        raw = self.r.get(REDIS_PREFIX + sig)
        try:
            return FindingRecord.from_dict(json.loads(raw)) if raw else None
        except (ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def _file(path: str) -> FindingRecord | None:
        try:
            with open(path, encoding="utf-8") as f:
                return FindingRecord.from_dict(json.load(f))
        except (OSError, ValueError, KeyError, TypeError):
            return None
