"""A command's settings: defaults < config file < flags, and a note on stderr for each setting a config file
changed."""

from typing import Optional

from ..errors import ConfigError
from ._guard import note_after, say


def settings_for(paths: list[str], config: Optional[str], flags: dict, isolated: bool = False):
    """Defaults < config file (--config, else the project's: the cwd or a folder above it) < flags.
    A config file inside the data is never read unless named with --config; each one is a warning.
    --isolated reads no config file at all.  A config file that changes a setting says so on stderr,
    in every format: one found above a downloaded data tree must not change a verdict unseen."""
    from ..judge.config import configs_in_data, find_config, read_config, resolve_settings
    from ..signals.resolve import parse_mapping

    if isolated and config:
        raise ConfigError("--isolated: reads no config file; it cannot be given with --config")
    flags = {**flags, "map": parse_mapping(flags.get("map"))}
    cfg = None if isolated else read_config(config) if config else find_config(paths)
    if config and cfg is None:
        raise ConfigError(f"--config {config}: no [tool.stabdiag] table in it")
    for ignored in configs_in_data(paths, cfg):
        say(f"warning: {ignored}: not read: a config file beside the data being judged is never applied; "
            "settings come from the project (the working directory up) or --config FILE")
    return _announce(resolve_settings(cfg, flags), cfg)


def _announce(resolved, cfg):
    """A `note:` on stderr naming the config file used and each setting it changed (--isolated: none)."""
    if cfg is not None:
        from ..report.settings import changed

        chosen = resolved[0] if isinstance(resolved, tuple) else resolved
        mine = [f"{key} {text}" for key, text, origin in changed(chosen) if "file" in origin]
        if mine:
            note_after(f"note: config {cfg.where} changes: {'; '.join(mine)} (--isolated reads no config file)")
    return resolved
