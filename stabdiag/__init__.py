"""stabdiag: which layer of an LLM training run failed first, the evidence, and what to check first."""

from ._version import __version__
from .errors import ConfigError, InputError, MissingExtraError, RuleError, StabdiagError
from .run import Run, Series

__all__ = ["__version__", "Run", "Series", "StabdiagError", "InputError", "RuleError", "ConfigError",
           "MissingExtraError"]
