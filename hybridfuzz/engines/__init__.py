"""Engine adapters: a Case goes in, a Trace comes out; nothing an engine does takes the caller down.

- ``offline``: runs a case's steps on vLLM's offline ``LLM`` in the current process.
- ``forkserver``: the fast path; one process imports vLLM once, forks a fresh engine per case.
- ``subprocess_host``: the naive path; a new interpreter and a default ``vllm.LLM`` per case.
- ``server``: the OpenAI-compatible ``vllm serve`` with its development endpoints.
"""
