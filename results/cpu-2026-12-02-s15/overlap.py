"""Seconds from a worker entering its fork server to having both the server ready and its first batch of sessions
drawn, with the server's start awaited first (as before 2026-12-02) or overlapped with the draw (now).

    python3 results/cpu-2026-12-02-s15/overlap.py   # on CPU: the server's start includes its warm-up engine
"""
import sys
import time

sys.path.insert(0, "tests")
from test_draw_ahead import H200_026  # noqa: E402  (vLLM 0.26.0 on an H200, as `hybridfuzz platform` printed it)

from hybridfuzz import sleepwake  # noqa: E402
from hybridfuzz.campaign.loop import DRAW_AHEAD, draw_ahead  # noqa: E402
from hybridfuzz.engines.forkserver import ForkServer  # noqa: E402
from hybridfuzz.strategies.case import sessions  # noqa: E402

strategy = sessions(H200_026, 8, 12, 24, sleepwake.OFFLINE)  # a GPU worker's sessions: 24 cases, 12 steps
for order in ("start, then draw", "draw while it starts"):
    t0 = time.perf_counter()
    with ForkServer(workers=1, timeout=300) as host:
        if order == "start, then draw":
            host.start()
        t_draw = time.perf_counter()
        drawn = draw_ahead(strategy, seed=1, n=DRAW_AHEAD)
        draw_s = time.perf_counter() - t_draw
        host.start()
        ready = time.perf_counter() - t0
    # start_seconds: from the launch until the caller read the server's hello (overlapped: once the draw had ended)
    print(f"{order}: ready after {ready:.1f} s (draw of {len(drawn)} sessions {draw_s:.1f} s, "
          f"launch to hello read {host.start_seconds:.1f} s)")
