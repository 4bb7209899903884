"""hybridfuzz: property-based differential fuzzing of vLLM hybrid (GDN/Mamba + attention) models.

Importing the package does nothing else: vLLM imports it in every engine process
of the environment through the fault plugin's entry point, so it must not change
them. hybridfuzz's own processes install the torchvision guard at their entry
points (``hybridfuzz._guard.install``).
"""

__version__ = "0.1.0"
