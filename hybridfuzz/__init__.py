"""hybridfuzz: property-based differential fuzzing of vLLM hybrid (GDN/Mamba + attention) models.

Importing the package does nothing else: vLLM imports it in every engine process
of the environment through the fault plugin's entry point, so it must not change
them. hybridfuzz's own processes install the torchvision guard at their entry
points (``hybridfuzz._guard.install``).

Layout: the stages are packages (``strategies`` and ``oracles`` generate and judge a case, ``engines`` and
``campaign`` run it, ``triage``, ``bench``, ``report`` and ``export`` come after, ``cli`` is the command line);
the flat modules are the data and rules they share. The import graph has no cycles, only ``cli`` imports
``cli``, and strategies/oracles import no stage above them (tests/test_import_graph.py).

Imports are at module level. An import inside a function is for one reason only: to keep vLLM, torch or
another heavy or optional package (and modules that import them) out of import time, since the CLI, the
fault plugin and the tests import much of hybridfuzz without an engine.
"""



def __getattr__(name: str):
    if name == "__version__":  # read from package metadata on first use, not at import
        from hybridfuzz.version import version

        return version()
    raise AttributeError(name)
