"""hybridfuzz: property-based differential fuzzing of vLLM hybrid (GDN/Mamba + attention) models.

Importing the package does nothing else: vLLM imports it in every engine process
of the environment through the fault plugin's entry point, so it must not change
them. hybridfuzz's own processes install the torchvision guard at their entry
points (``hybridfuzz._guard.install``).
"""



def __getattr__(name: str):
    if name == "__version__":  # read from package metadata on first use, not at import
        from hybridfuzz.version import version

        return version()
    raise AttributeError(name)
