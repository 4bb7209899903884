"""Fuzz runs: the loop (``fuzz`` runs one) and long campaigns of several workers sharing one
example database and one findings directory, a signature claimed so that a bug is shrunk and
reported once.

Modules: ``loop`` (FuzzLoop) and its parts, ``pacing``, ``confirm``, ``filing``, ``shrinking`` and
``counting`` (Stats); ``background`` (the background shrinker), ``records`` (CaseEvent, RunSummary, FindingState, iter_events),
``config`` (what a worker and a loop are given), ``claims``, ``database`` (shared Hypothesis examples),
``state`` (finding states, in files and Redis), ``worker``, ``stats``, ``supervisor``.

Layout of a campaign directory DIR::

    DIR/campaign.json          budget, time spent, when each signature was first seen / reported
    DIR/summary.json           the aggregate (rewritten at every status tick and at the end)
    DIR/findings/<sig>.yaml    one case per signature (written atomically while it shrinks)
    DIR/state/<sig>.json       its FindingState (open, replayed, flaky); also in Redis with --redis
    DIR/hypothesis-db/         the local Hypothesis example database (a copy, with --redis)
    DIR/claims/<sig>.json      file claims (no --redis)
    DIR/heartbeats/<w>.json    file heartbeats (no --redis)
    DIR/workers/<i>/           events.jsonl (one line per case, appended across restarts),
                               summary.json (the loop's), state.json, sessions.jsonl, worker.log

A ``fuzz`` directory holds summary.json, events.jsonl and hypothesis-db/ (its findings go to
corpus/found in a checkout, else DIR/findings/).
"""
