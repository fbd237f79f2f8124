"""The training callbacks under the name users import them by (`from stabdiag.integrations import
StabdiagCallback`); they live in stabdiag/live/integrations/.  Nothing loads until a name is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .live.integrations.lightning_callback import StabdiagLightningCallback
    from .live.integrations.monitor import Monitor
    from .live.integrations.trainer_callback import StabdiagCallback

__all__ = ["Monitor", "StabdiagCallback", "StabdiagLightningCallback"]

_LAZY = {name: "stabdiag.live.integrations" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
