"""Names a package exports but imports only on first use (PEP 562), so that `import stabdiag` and
`stabdiag --version` read no numpy, and stabdiag.live.integrations no transformers or lightning."""

from __future__ import annotations

import sys
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, str]):
    """The package's module-level __getattr__ and __dir__: each name in `exports` is taken from its module
    (relative to `package`) when first asked for, and kept in the package's namespace from then on."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
