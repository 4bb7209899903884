"""Claims: who may shrink which signature, so that a bug is shrunk and reported once.

Before a worker writes or shrinks a signature it must hold the claim: ``SET
hybridfuzz:sig:<sig> <claim> NX`` on Redis, or an ``O_EXCL`` file under DIR/claims. A
claim names the worker, its host and pid. A signature is *done* once its finding state
(campaign/state.py) is replayed or flaky; a done signature is known to every worker. A
claim that is not done is *stale* when its holder's pid is dead on this host or its
heartbeat is older than ``stale_after_s`` (2 min): then the next worker to meet the
signature takes it over.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time

from hybridfuzz.campaign.state import FindingStore
from hybridfuzz.case import DeviceKind
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import filename, known_signatures

STALE_AFTER_S = 120.0
HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (killed, not yet reaped by its parent) counts as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def done_signatures(store: FindingStore, *known_dirs: str, on: DeviceKind | None = None) -> set[str]:
    """Known now: the campaign's finished findings (an open one is not known yet: it may be
    resumed), plus every case under known_dirs seen on this kind of device (``known_signatures``)."""

    return {sig for sig, rec in store.all().items() if rec.state.done} | known_signatures(*known_dirs, on=on)


class Claims:
    """Who may shrink which signature. Subclasses store claims in files or in Redis."""

    def __init__(self, worker: str, store: FindingStore, stale_after_s: float = STALE_AFTER_S):
        self.worker = worker
        self.store = store
        self.stale_after_s = stale_after_s
        self.pid = os.getpid()
        self.done: set[str] = set()
        self.mine: set[str] = set()
        self.takeovers: list[str] = []

    def _mine(self) -> str:
        return json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()})

    def _stale(self, claim: dict) -> bool:
        if claim.get("host") == HOST and not pid_alive(int(claim.get("pid", 0))):
            return True
        beat = self.heartbeat_of(claim.get("worker", ""))
        if beat is None:
            return time.time() - float(claim.get("t", 0)) > self.stale_after_s
        if beat.get("pid") != claim.get("pid") and beat.get("host") == claim.get("host") == HOST:
            # the worker restarted under the same name: the claim's process is gone, its name lives on
            return not pid_alive(int(claim.get("pid", 0)))
        return time.time() - float(beat.get("t", 0)) > self.stale_after_s

    def claim(self, sig: str) -> bool:
        if sig in self.done:
            return False
        if self._done(sig):
            self.done.add(sig)
            self.set_done(sig)
            return False
        ok = self._claim(sig)
        if ok:
            self.mine.add(sig)
        return ok

    def taken_elsewhere(self, sig: str) -> bool:
        """Done, or held by another live worker: meeting it again is not worth a fresh engine.

        Asked before a warm divergence is confirmed on fresh engines: in a 10-minute vLLM 0.26.0
        campaign on an H200 (2026-11-30), workers re-confirmed a signature another worker was shrinking
        132 times and spent 17 % of their time confirming."""
        if sig in self.done or self._done(sig):
            return True
        if sig in self.mine:
            return False
        claim = self.holder(sig)
        return claim is not None and claim.get("worker") != self.worker and not self._stale(claim)

    def sweep(self) -> None:
        """Mark this worker's finished signatures done, for workers on other hosts."""
        for sig in list(self.mine):
            if self._done(sig):
                self.set_done(sig)
                self.mine.discard(sig)
                self.done.add(sig)

    def _done(self, sig: str) -> bool:
        state = self.store.get(sig)
        return state is not None and state.done

    # storage
    def _claim(self, sig: str) -> bool:
        raise NotImplementedError

    def set_done(self, sig: str) -> None:
        raise NotImplementedError

    def heartbeat(self) -> None:
        raise NotImplementedError

    def heartbeat_of(self, worker: str) -> dict | None:
        raise NotImplementedError

    def holder(self, sig: str) -> dict | None:
        raise NotImplementedError


class FileClaims(Claims):
    """Claims as files under DIR/claims (one host): O_EXCL creation, takeovers under a flock."""

    def __init__(self, campaign_dir: str, worker: str, store: FindingStore, stale_after_s: float = STALE_AFTER_S):
        super().__init__(worker, store, stale_after_s)
        self.dir = os.path.join(campaign_dir, "claims")
        self.beats = os.path.join(campaign_dir, "heartbeats")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.beats, exist_ok=True)

    def _path(self, sig: str) -> str:
        return os.path.join(self.dir, filename(sig)[: -len(".yaml")] + ".json")

    @contextlib.contextmanager
    def _lock(self):

        with open(os.path.join(self.dir, ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def holder(self, sig: str) -> dict | None:
        try:
            with open(self._path(sig), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _claim(self, sig: str) -> bool:
        path = self._path(sig)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(self._mine())
            return True
        with self._lock():
            held = self.holder(sig)
            if held is not None and held.get("done"):
                self.done.add(sig)
                return False
            if held is None or held.get("worker") == self.worker or self._stale(held):
                if held is not None and held.get("worker") != self.worker:
                    self.takeovers.append(sig)
                write_atomic(path, self._mine())
                return True
            return False

    def set_done(self, sig: str) -> None:
        with self._lock():
            held = self.holder(sig) or {"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}
            write_atomic(self._path(sig), json.dumps(dict(held, done=True)))

    def heartbeat(self) -> None:
        write_atomic(os.path.join(self.beats, filename(self.worker)[: -len(".yaml")] + ".json"),
                     json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}))

    def heartbeat_of(self, worker: str) -> dict | None:
        try:
            with open(os.path.join(self.beats, filename(worker)[: -len(".yaml")] + ".json"), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


class RedisClaims(Claims):
    """Claims in Redis (several hosts): SET NX decides, takeovers in a WATCH/MULTI transaction."""

    PREFIX = "hybridfuzz:sig:"
    BEAT = "hybridfuzz:hb:"

    def __init__(self, client, worker: str, store: FindingStore, stale_after_s: float = STALE_AFTER_S):
        super().__init__(worker, store, stale_after_s)
        self.r = client

    def holder(self, sig: str) -> dict | None:
        raw = self.r.get(self.PREFIX + sig)
        return json.loads(raw) if raw else None

    def _claim(self, sig: str) -> bool:
        import redis

        key = self.PREFIX + sig
        if self.r.set(key, self._mine(), nx=True):
            return True
        for _ in range(5):
            with self.r.pipeline() as pipe:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    held = json.loads(raw) if raw else None
                    if held is not None and held.get("done"):
                        self.done.add(sig)
                        return False
                    if held is not None and held.get("worker") != self.worker and not self._stale(held):
                        return False
                    pipe.multi()
                    pipe.set(key, self._mine())
                    pipe.execute()
                    if held is not None and held.get("worker") != self.worker:
                        self.takeovers.append(sig)
                    return True
                except redis.WatchError:
                    continue
        return False

    def set_done(self, sig: str) -> None:
        key = self.PREFIX + sig
        held = self.holder(sig) or json.loads(self._mine())
        self.r.set(key, json.dumps(dict(held, done=True)))

    def heartbeat(self) -> None:
        self.r.set(self.BEAT + self.worker, json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}),
                   ex=int(max(600, 5 * self.stale_after_s)))

    def heartbeat_of(self, worker: str) -> dict | None:
        raw = self.r.get(self.BEAT + worker)
        return json.loads(raw) if raw else None
