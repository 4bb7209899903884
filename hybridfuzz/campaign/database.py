"""The example database the workers of a campaign share (a directory, plus Redis with
--redis), and the wrapper that keeps another worker's shrinking progress in it."""
from __future__ import annotations

import os


def redis_client(url: str):
    import redis

    client = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=10, health_check_interval=30)
    client.ping()
    return client


def make_database(campaign_dir: str, redis_url: str | None):
    """The shared Hypothesis example database: DIR/hypothesis-db, plus Redis with a URL (each host keeps a copy)."""
    from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

    local = DirectoryBasedExampleDatabase(os.path.join(campaign_dir, "hypothesis-db"))
    if not redis_url:
        return local
    from hypothesis.extra.redis import RedisExampleDatabase

    return MultiplexedDatabase(local, RedisExampleDatabase(redis_client(redis_url), key_prefix=b"hybridfuzz-example:"))


class KeepOthersDatabase:
    """Wraps the shared database for one worker. Hypothesis deletes a replayed example that no
    longer fails; for this worker an example of a signature another worker is still shrinking does
    not fail (it is not its to shrink), but it is that worker's progress: keep it."""

    def __new__(cls, inner):
        from hypothesis.database import ExampleDatabase

        class _Keep(ExampleDatabase):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
                self.keep = False  # set by the claim hook for the example being run, cleared before the next

            def __repr__(self) -> str:
                return f"KeepOthersDatabase({self.inner!r})"

            def fetch(self, key):
                yield from self.inner.fetch(key)

            def save(self, key, value):
                self.inner.save(key, value)

            def delete(self, key, value):
                if not self.keep:
                    self.inner.delete(key, value)

            def move(self, src, dest, value):
                self.inner.move(src, dest, value)

        return _Keep(inner)
