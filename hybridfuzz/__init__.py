"""hybridfuzz: property-based differential fuzzing of vLLM hybrid (GDN/Mamba + attention) models."""
from hybridfuzz import _guard  # noqa: F401  (must run before anything imports transformers)

__version__ = "0.1.0"
