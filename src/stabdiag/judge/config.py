"""Settings for `stabdiag check`: defaults, then a config file, then command-line flags (flags win).

The file is `[tool.stabdiag]` in a `pyproject.toml`, or the top level of a `stabdiag.toml`, found in the
working directory or the nearest folder above it that has one (the project, as ruff and pytest look),
or named with --config; a `stabdiag.toml` wins over a `pyproject.toml` in the same folder.  A config
file inside a directory being judged is never read unless --config names it: run directories are
written by training jobs, and a file there must not be able to switch the gate off (`ignore = ["L1",
"L2", "L3", "L4"]`).  Keys are the long option names in kebab-case (ruff's convention) and anything
the reader does not understand is refused, naming the file and the key, because a silently ignored
`fail_on = "warn"` turns a CI gate off without anyone noticing.  `rules` directories must exist and
lie in the config file's folder or below it; others are named with --rules.

    [tool.stabdiag]
    fail-on = "warn"
    select  = ["L1", "L2"]
    ignore  = ["L2.entropy-below-floor"]
    rules   = ["ci/rules"]                 # relative to the file
    [tool.stabdiag.map]
    reward = "critic/score/mean"
    [tool.stabdiag.params."L3.grad-norm-spike"]
    ratio_vs_ema = 10

`one-run = true` keeps the logs side by side in one folder one run, `split-files = true` reads each as a run
of its own (neither: stabdiag.read._peers decides, and says so in a note); give at most one of them.

Lists (`select`, `ignore`, `rules`) given on the command line replace the file's; tables (`map`,
`params`) are merged entry by entry, the flag's entry winning.  `jobs` (worker processes for a tree of
runs) changes how fast a check runs, never what it says: --show-settings shows it, no report does.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import _toml
from ..errors import ConfigError, RuleError
from .rules import Rule, get_rule

KEYS = ("map", "select", "ignore", "params", "fail-on", "allow-unknown", "no-guess", "rules", "one-run",
        "split-files")
FAIL_ON = ("warn", "fail")
DEFAULTS: dict[str, object] = {"map": {}, "select": (), "ignore": (), "params": {}, "fail-on": "fail",
                               "allow-unknown": False, "no-guess": False, "rules": (), "one-run": False,
                               "split-files": False}
FLAGS = {"map": "--map", "select": "--select", "ignore": "--ignore", "params": "--param",
         "fail-on": "--fail-on", "allow-unknown": "--allow-unknown", "no-guess": "--no-guess", "rules": "--rules",
         "jobs": "--jobs", "one-run": "--one-run", "split-files": "--split-files"}
RUN_KEYS = ("jobs",)       # how a check runs, not what it says: in no report, so every --jobs reads the same
BOOL_KEYS = ("allow-unknown", "no-guess", "one-run", "split-files")
GROUPING = ("one-run", "split-files")   # how the logs side by side in one folder make runs: one choice, two keys

# A pool costs its start (each worker imports numpy and stabdiag: ~0.5 s on 2 cores) and the parent's
# share of a core; measured on 2 busy cores, the 100 small runs of ../shared/real_healthy + real_logs
# (28 MB) took 4.8-5.1 s with -j 1 and 5.7-7.3 s with -j 2.  Unless --jobs or the config says how many,
# a pool is used only with more cores than POOL_MAX_SERIAL_CORES and more input than POOL_MIN_BYTES (a
# few seconds of serial work): stabdiag.batch.default_workers applies the rule, `Settings.show` says it.
POOL_MIN_BYTES = 64 << 20
POOL_MAX_SERIAL_CORES = 2


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A config file's raw `[tool.stabdiag]` table, with where it came from for error messages."""

    path: Path
    table: dict
    where: str          # e.g. "pyproject.toml [tool.stabdiag]", used as the `<where>` of errors

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: {key}: {problem}")


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved settings of one `check`, and where each value came from (default, file or flag)."""

    map: dict[str, str] = field(default_factory=dict)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    params: dict[str, dict[str, float]] = field(default_factory=dict)
    fail_on: str = "fail"
    allow_unknown: bool = False         # exit 0 for a run nothing could be judged on (default: exit 3)
    no_guess: bool = False              # read only --map and the alias table: no signal guessed from names
    rules: tuple[str, ...] = ()
    origin: dict[str, str] = field(default_factory=dict)   # key -> "default" | file | flag
    file: str | None = None
    map_origin: dict[str, str] = field(default_factory=dict)  # signal -> where its --map entry came from
    jobs: int = 1                       # worker processes for a tree of runs (default: `default_jobs`)
    one_run: bool = False               # the logs side by side in one folder are one run (never split)
    split_files: bool = False           # ... each its own run (stabdiag.read._peers decides when neither)

    def value(self, key: str):
        """The value of a key of KEYS (kebab-case, as in the config file)."""
        return getattr(self, key.replace("-", "_"))

    def show(self) -> str:
        """`--show-settings`: each resolved value and where it came from."""
        def fmt(key: str) -> str:
            value = self.value(key)
            if key == "map":
                return ", ".join(f"{s}={k}" for s, k in value.items()) or "-"
            if key == "params":
                return ", ".join(f"{rid}.{name}={v:g}" for rid, ps in value.items()
                                 for name, v in ps.items()) or "-"
            if isinstance(value, tuple):
                return ", ".join(value) or "-"
            return str(value)
        width = max(len(key) for key in KEYS)
        lines = [f"{'config':<{width}} {self.file or '(none found)'}"]
        lines += [f"{key:<{width}} {fmt(key)}  ({self.origin.get(key, 'default')})" for key in KEYS]
        if "jobs" in self.origin:
            lines.append(f"{'jobs':<{width}} {self.jobs}  ({self.origin['jobs']})")
        else:
            shown, why = default_jobs(self.jobs)
            lines.append(f"{'jobs':<{width}} {shown}  (default: {why})")
        return "\n".join(lines) + "\n"


def default_jobs(cores: int) -> tuple[str, str]:
    """The worker processes a check uses when neither --jobs nor the config says, as --show-settings shows
    them before any log is read: (the number or numbers, why); stabdiag.batch.default_workers decides."""
    if cores <= POOL_MAX_SERIAL_CORES:
        return "1", f"one process on {POOL_MAX_SERIAL_CORES} cores or fewer, where a pool costs more than it gives"
    return (f"1 or {cores}", f"one process for under {POOL_MIN_BYTES >> 20} MB of logs, else the {cores} "
                             "usable cores")


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (taskset, a container's cpuset), else all."""
    counted = getattr(os, "process_cpu_count", None)          # Python 3.13+
    if counted is not None:
        return counted() or 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_jobs(value: object, where: str) -> int:
    """A number of worker processes, 1 or more (`--jobs 3`, `jobs = 3`); `where` names the flag or key."""
    text = value.strip() if isinstance(value, str) else value
    number = int(text) if isinstance(text, str) and text.isdigit() else text
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ConfigError(f"{where}: expected a whole number of worker processes, 1 or more; got {value!r}")
    return number


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def read_config(path: str | os.PathLike[str]) -> ConfigFile | None:
    """Read one config file; None for a pyproject.toml without a [tool.stabdiag] table."""
    path = Path(path)
    shown = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read the config file ({exc.strerror or exc})") from None
    if path.name == "pyproject.toml" and "stabdiag" not in text:
        return None        # no [tool.stabdiag] in any spelling: another tool's file, not parsed for nothing
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("stabdiag")
        if table is None:
            return None
        if not isinstance(table, dict):
            raise ConfigError(f"{shown}: [tool.stabdiag] must be a table")
        return ConfigFile(path, table, f"{shown} [tool.stabdiag]")
    return ConfigFile(path, data, shown)


def find_config(paths: list[str], cwd: str | os.PathLike[str] | None = None) -> ConfigFile | None:
    """The project's config: in the working directory or the nearest folder above it with one, skipping
    folders inside a directory being judged (`paths`); None when there is none."""
    data = _data_dirs(paths)
    start = Path(cwd if cwd is not None else Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if any(folder == d or d in folder.parents for d in data):
            continue
        for name in ("stabdiag.toml", "pyproject.toml"):
            candidate = folder / name
            if candidate.is_file():
                found = read_config(candidate)
                if found is not None:
                    return found
    return None


def _data_dirs(paths: list[str]) -> list[Path]:
    return [Path(p).resolve() for p in paths if "://" not in p and os.path.isdir(p)]


def configs_in_data(paths: list[str], used: ConfigFile | None) -> list[str]:
    """Config files at the top of a directory being judged, or beside a file being judged, that were not
    read (they used to be): each is worth a warning, so that nobody relies on one without knowing."""
    out: list[str] = []
    for p in paths:
        if "://" in p:
            continue
        folder = Path(p) if os.path.isdir(p) else Path(p).parent
        for name in ("stabdiag.toml", "pyproject.toml"):
            candidate = folder / name
            if not candidate.is_file() or (used is not None and candidate.resolve() == used.path.resolve()):
                continue
            if name == "pyproject.toml" and "[tool.stabdiag" not in _head_text(candidate):
                continue
            if _display(candidate) not in out:
                out.append(_display(candidate))
    return out


def _head_text(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def _unknown_key(cfg: ConfigFile, key: str) -> ConfigError:
    snake = key.replace("_", "-")
    known = KEYS + RUN_KEYS
    if snake in known:
        hint = f" (keys are kebab-case: did you mean '{snake}'?)"
    else:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
    return ConfigError(f"{cfg.where}: unknown key '{key}'{hint}")


def _string_list(cfg: ConfigFile, key: str) -> tuple[str, ...]:
    value = cfg.table[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise cfg.error(key, f"expected a list of strings; got {value!r}")
    return tuple(value)


def _file_values(cfg: ConfigFile) -> dict[str, object]:
    """The file's values, type-checked; rule ids are checked later, once the rules are loaded."""
    values: dict[str, object] = {}
    for key in cfg.table:
        if key not in KEYS and key not in RUN_KEYS:
            raise _unknown_key(cfg, key)
    if "jobs" in cfg.table:
        values["jobs"] = parse_jobs(cfg.table["jobs"], f"{cfg.where}: jobs")
    for key in ("select", "ignore"):
        if key in cfg.table:
            values[key] = _string_list(cfg, key)
    if "rules" in cfg.table:
        folders = tuple(cfg.path.parent / d for d in _string_list(cfg, "rules"))
        home = cfg.path.parent.resolve()
        for folder in folders:
            if not folder.is_dir():
                raise cfg.error("rules", f"rules directory '{_display(folder)}' not found "
                                         "(paths are relative to the config file)")
            if folder.resolve() != home and home not in folder.resolve().parents:
                raise cfg.error("rules", f"rules directory '{_display(folder)}' is outside the config file's "
                                         "folder; keep rule files in the project, or name them with --rules")
        values["rules"] = tuple(str(folder) for folder in folders)
    if "fail-on" in cfg.table:
        value = cfg.table["fail-on"]
        if value not in FAIL_ON:
            raise cfg.error("fail-on", f"expected one of {', '.join(FAIL_ON)}; got {value!r}")
        values["fail-on"] = value
    for key in BOOL_KEYS:
        if key in cfg.table:
            value = cfg.table[key]
            if not isinstance(value, bool):
                raise cfg.error(key, f"expected true or false; got {value!r}")
            values[key] = value
    if "map" in cfg.table:
        table = cfg.table["map"]
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise cfg.error("map", "expected a table of SIGNAL = \"metric key\"")
        _check_signals(cfg, table)
        values["map"] = dict(table)
    if "params" in cfg.table:
        table = cfg.table["params"]
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise cfg.error("params", "expected tables of parameters per rule, e.g. "
                                      "[tool.stabdiag.params.\"L3.grad-norm-spike\"] ratio_vs_ema = 10")
        values["params"] = table
    return values


def _check_signals(cfg: ConfigFile, table: dict) -> None:
    from ..signals.resolve import default_alias_table

    known = default_alias_table()
    for signal in table:
        if not known.is_known(signal):
            close = difflib.get_close_matches(signal, list(known.signals), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise cfg.error(f"map.{signal}", f"unknown signal '{signal}'{hint}")


def check_selectors(selectors: tuple[str, ...], rules: tuple[Rule, ...], where: str) -> tuple[str, ...]:
    """Every --select/--ignore entry must name a rule, an alias, or a prefix of one (L1, L3.grad-norm), in
    any case, comma lists split; returns them as the rules spell them."""
    from .selection import canonical

    return canonical(selectors, rules, where)


def check_param(rule_id: str, name: str, value: object, rules: tuple[Rule, ...], where: str) -> tuple[str, float]:
    """Validate one rule parameter against its detector's declaration; returns (canonical id, value)."""
    try:
        rule = get_rule(rule_id, rules)
    except RuleError:
        close = difflib.get_close_matches(rule_id, [r.id for r in rules], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{where}: unknown rule id '{rule_id}'{hint}") from None
    declared = {p.name: p for p in rule.spec.params}
    if name not in declared:
        close = difflib.get_close_matches(name, list(declared), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"{where}: rule {rule.id} (detector {rule.spec.name}) has no parameter '{name}'; "
                          f"{hint}it has: {', '.join(declared) or 'none'}")
    p = declared[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number; got {value!r}")
    if not p.low <= value <= p.high:
        raise ConfigError(f"{where}: {value:g} is outside the allowed range [{p.low:g}, {p.high:g}] "
                          f"({p.meaning})")
    return rule.id, float(value)


def parse_param_flags(items: list[str], rules: tuple[Rule, ...]) -> dict[str, dict[str, float]]:
    """`--param RULE.NAME=VALUE` flags (rule ids contain dots: the name is after the last one)."""
    params: dict[str, dict[str, float]] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        rule_id, dot, name = target.strip().rpartition(".")
        if not sep or not dot or not rule_id or not name or not raw.strip():
            raise ConfigError(f"--param: expected RULE.NAME=VALUE (e.g. L3.grad-norm-spike.ratio_vs_ema=10); "
                              f"got {item!r}")
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"--param {target}: expected a number; got {raw.strip()!r}") from None
        rid, value = check_param(rule_id, name.strip(), value, rules, f"--param {target}")
        params.setdefault(rid, {})[name.strip()] = value
    return params


def _file_params(cfg: ConfigFile, table: dict, rules: tuple[Rule, ...]) -> dict[str, dict[str, float]]:
    params: dict[str, dict[str, float]] = {}
    for rule_id, values in table.items():
        for name, value in values.items():
            rid, number = check_param(rule_id, name, value, rules, f"{cfg.where}: params.{rule_id}.{name}")
            params.setdefault(rid, {})[name] = number
    return params


def resolve_settings(cfg: ConfigFile | None, flags: dict[str, object],
                     load_rules=None) -> tuple[Settings, tuple[Rule, ...]]:
    """Merge defaults < file < flags, load the rules the result names, and validate ids against them.

    `flags` holds only options given on the command line: select, ignore, rules (lists), fail-on (str),
    allow-unknown, no-guess, one-run and split-files (bool), map (dict), param (list of RULE.NAME=VALUE
    strings) and jobs (int).
    """
    if load_rules is None:
        from .rules import load_rules
    file_values = _file_values(cfg) if cfg is not None else {}
    where_file = cfg.where if cfg is not None else ""
    origin: dict[str, str] = {}
    merged: dict[str, object] = {}
    for key in ("select", "ignore", "rules", "fail-on", *BOOL_KEYS, "jobs"):
        if flags.get(key):
            merged[key], origin[key] = flags[key], f"flag {FLAGS[key]}"
        elif key in file_values:
            merged[key], origin[key] = file_values[key], f"file {where_file}"
        elif key in DEFAULTS:
            merged[key], origin[key] = DEFAULTS[key], "default"
    _one_grouping(merged, origin, flags)
    fail_on = str(merged["fail-on"])
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on: expected one of {', '.join(FAIL_ON)}; got {fail_on!r}")
    rules = load_rules(list(merged["rules"]))
    chosen: dict[str, tuple[str, ...]] = {}
    for key in ("select", "ignore"):
        where = FLAGS[key] if origin[key].startswith("flag") else f"{where_file}: {key}"
        chosen[key] = check_selectors(tuple(merged[key]), rules, where)
    select, ignore = chosen["select"], chosen["ignore"]
    mapping = dict(file_values.get("map", {}))
    map_origin = {signal: f"{where_file}: map.{signal}" for signal in mapping}
    for signal, key in dict(flags.get("map") or {}).items():
        mapping[signal] = key
        map_origin[signal] = "--map"
    origin["map"] = _table_origin(file_values.get("map"), flags.get("map"), where_file, "--map")
    params = _file_params(cfg, file_values["params"], rules) if cfg and "params" in file_values else {}
    for rid, values in parse_param_flags(list(flags.get("param") or []), rules).items():
        params.setdefault(rid, {}).update(values)
    origin["params"] = _table_origin(file_values.get("params"), flags.get("param"), where_file, "--param")
    settings = Settings(map=mapping, select=select, ignore=ignore, params=params, fail_on=fail_on,
                        allow_unknown=bool(merged["allow-unknown"]), no_guess=bool(merged["no-guess"]),
                        one_run=bool(merged["one-run"]), split_files=bool(merged["split-files"]),
                        rules=tuple(merged["rules"]), origin=origin,
                        file=where_file or None, map_origin=map_origin,
                        jobs=int(merged.get("jobs") or usable_cores()))
    return settings, rules


def _one_grouping(merged: dict, origin: dict, flags: dict) -> None:
    """one-run and split-files are one choice: a flag for one drops the config file's other (flags win);
    both given together, both flags or both in the file, is an error."""
    given = [key for key in GROUPING if merged[key]]
    if len(given) < 2:
        return
    by_flag = [key for key in GROUPING if flags.get(key)]
    if len(by_flag) == 1:
        other = next(key for key in GROUPING if key != by_flag[0])
        merged[other], origin[other] = False, f"default (flag {FLAGS[by_flag[0]]} overrides the file's {other})"
        return
    where = [FLAGS[key] if origin[key].startswith("flag") else f"{key} ({origin[key]})" for key in GROUPING]
    raise ConfigError(f"{where[0]} and {where[1]}: keep the logs of one folder together or read each apart, "
                      "not both; give one of them")


def _table_origin(from_file, from_flags, where_file: str, flag: str) -> str:
    parts = ([f"file {where_file}"] if from_file else []) + ([f"flag {flag}"] if from_flags else [])
    return " + ".join(parts) or "default"
