"""A run's configuration from the files frameworks save beside its logs, for the stability-methods map:
verl's and other Hydra apps' `.hydra/config.yaml`, a `config.yaml`/`config.json` of the run, `args.json`,
`training_args.json`, `hparams.yaml` (Lightning).  A model's own `config.json` (architectures, model
type) is not the training configuration and is left out, but for its `vocab_size`.  W&B's config, where
the run has one, wins.
"""

from __future__ import annotations

import json
import os

from ..errors import InputError
from ._paths import inside

_CANDIDATES = (os.path.join(".hydra", "config.yaml"), "config.yaml", "config.yml", "config.json", "args.json",
               "training_args.json", "hparams.yaml")
_MAX_BYTES = 4 << 20


def read_run_config(folder: str) -> tuple[dict, list[str], list[str]]:
    """(the merged configuration, the files it came from, notes on files that could not be read)."""
    config: dict = {}
    used: list[str] = []
    notes: list[str] = []
    for name in _CANDIDATES:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        if os.path.islink(path) and not inside(os.path.realpath(path), os.path.realpath(folder)):
            notes.append(f"{name}: a symbolic link out of the run folder (to {os.path.realpath(path)}); not read")
            continue
        try:
            if os.path.getsize(path) > _MAX_BYTES:
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            data = json.loads(text) if name.endswith(".json") else _yaml(text, path)
        except (OSError, ValueError, RecursionError, InputError) as exc:    # RecursionError: nested too deeply
            why = exc.problem if isinstance(exc, InputError) else type(exc).__name__
            notes.append(f"{name}: not read as a run configuration ({why})")
            continue
        if not isinstance(data, dict):
            continue
        if name == "config.json" and ("architectures" in data or "model_type" in data):
            # a model's own config: not the training configuration, but the one place its vocabulary
            # size is written (L3.loss-at-uniform-level reads it)
            if isinstance(data.get("vocab_size"), int):
                config.setdefault("vocab_size", data["vocab_size"])
            continue
        for key, value in data.items():
            config.setdefault(key, value)
        used.append(name)
    return config, used, notes


def _yaml(text: str, path: str):
    import yaml

    from ._budget import yaml_load

    try:
        return yaml_load(text, path)         # an alias bomb is refused, never expanded
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from None
