"""Online W&B runs (`wandb://ENTITY/PROJECT/RUN_ID` or a run URL) at full resolution, with a cache.

The history comes from `wandb.Api().run(...).scan_history()`, never from `run.history()`, which
samples 500 points.  A keyed scan only returns the rows that hold every requested key, so keys are
scanned in groups that were logged equally often (the dense training metrics together, an eval
logged every N steps in its own group), and a key that still comes back short is scanned alone.
HTTP 429 answers are waited out with exponential backoff, and the scan resumes where it stopped.

The history is cached as Parquet under the user cache directory (STABDIAG_CACHE_DIR overrides),
one file per run and last step: a rerun on a run that has not moved is read from disk, a finished
run without touching the network, and `refresh=True` fetches again.  Credentials are wandb's own
(`wandb login` or WANDB_API_KEY); they are never printed, and API error text is scrubbed of
anything that looks like a key.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

from ....errors import InputError, MissingExtraError
from ...run import Run
from ._cache import cached_for, finished_cache, read_cache, run_cache_dir, run_from_table, to_table, write_cache

_URI = re.compile(r"^wandb://(?P<entity>[^/?#\s]+)/(?P<project>[^/?#\s]+)/(?:runs/)?(?P<run>[^/?#\s]+)/?$")
_URL = re.compile(r"^https?://(?:www\.)?wandb\.ai/(?P<entity>[^/?#\s]+)/(?P<project>[^/?#\s]+)/runs/"
                  r"(?P<run>[^/?#\s]+)(?:[/?#].*)?$")
_UNSAFE_PART = re.compile(r"[/\\#?%:\x00-\x1f\x7f]")     # W&B refuses these in names; / and \ split paths
_NUMERIC_TYPES = frozenset(("number", "int", "float", "nan", "infinity", "bool", "boolean"))
_TEXT_NUMBERS = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf,
                 "inf": math.inf, "-inf": -math.inf}
_MAX_RETRIES = 8
_TIMEOUT_S = 30               # per API request; wandb's own default is 20
_PAGE_ROWS = 1000
_SECRET = re.compile(r"(?i)(api[_-]?key|authorization|token|password)([\"'=:\s]+)[^\s\"',;]+|\b[0-9a-f]{40,}\b")


def _sleep(seconds: float) -> None:          # a seam for tests
    time.sleep(seconds)


def handles_uri(uri: str) -> bool:
    return uri.startswith("wandb://") or _URL.match(uri) is not None


def parse_uri(uri: str) -> tuple[str, str, str]:
    """(entity, project, run id) of a wandb:// URI or a W&B run URL."""
    match = _URI.match(uri) or _URL.match(uri)
    if match is None:
        raise InputError(uri, "expected wandb://ENTITY/PROJECT/RUN_ID or "
                              "https://wandb.ai/ENTITY/PROJECT/runs/RUN_ID")
    parts = match.group("entity"), match.group("project"), match.group("run")
    for what, part in zip(("entity", "project", "run id"), parts):
        if part in (".", "..") or _UNSAFE_PART.search(part):
            raise InputError(uri, f"{what} {part!r} is not a W&B name (no '.' or '..', no / \\ # ? % : or "
                                  "control characters); it also names a folder of the cache")
    return parts


def load_uri(uri: str, **options) -> Run:
    """An online run's full history: from the cache when the run has not moved, else fetched."""
    entity, project, run_id = parse_uri(uri)
    refresh = bool(options.get("refresh"))
    step_col = options.get("step_col")
    folder = run_cache_dir(entity, project, run_id)
    if not refresh:
        cached = finished_cache(folder, (entity, project, run_id))
        if cached is not None:
            return read_cache(cached, uri, step_col)
    api = _open_api(uri)
    run = _call(uri, lambda: api.run(f"{entity}/{project}/{run_id}"), what="find the run")
    return _load_api_run(run, uri, (entity, project, run_id), folder, refresh, step_col, bool(options.get("progress")))


def is_api_run(obj) -> bool:
    """A `wandb.Api().run(...)` object, or anything shaped like one (a stand-in in tests)."""
    return all(hasattr(obj, name) for name in ("scan_history", "entity", "project", "id"))


def load_api_run(run, **options) -> Run:
    """A run object of W&B's public API (`wandb.Api().run("entity/project/id")`, or one of
    `api.runs(...)`): its full history through scan_history, cached as for its wandb:// URI."""
    entity, project, run_id = str(run.entity), str(run.project), str(run.id)
    uri = f"wandb://{entity}/{project}/{run_id}"
    parse_uri(uri)                                   # the same refusals as a URI typed by hand
    folder = run_cache_dir(entity, project, run_id)
    return _load_api_run(run, uri, (entity, project, run_id), folder, bool(options.get("refresh")),
                         options.get("step_col"), bool(options.get("progress")))


def _load_api_run(run, uri: str, names: tuple[str, str, str], folder, refresh: bool, step_col, progress: bool) -> Run:
    entity, project, run_id = names
    keys_info, last_step = _history_keys(run, uri)
    path = folder / f"history-step{last_step}.parquet"
    if not refresh and cached_for(path, (entity, project, run_id)):
        return read_cache(path, uri, step_col)
    columns, notes = _fetch_history(run, uri, keys_info, progress)
    meta = _run_meta(run, entity, project, run_id, last_step)
    meta["notes"] = notes
    table = to_table(columns, meta)
    written = write_cache(path, table)
    return run_from_table(table, uri, step_col, path if written else None)


def _open_api(uri: str):
    try:
        import wandb
    except ImportError:
        raise MissingExtraError("reading online W&B runs needs the wandb package", "wandb") from None
    if not _has_credentials():
        raise InputError(uri, "not logged in to W&B; run `wandb login` or set WANDB_API_KEY")
    return _call(uri, lambda: wandb.Api(timeout=_TIMEOUT_S), what="connect to W&B")


def _has_credentials() -> bool:
    """Whether wandb would find an API key without prompting (env, netrc, settings)."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth

        host = wandb_setup.singleton().settings.base_url
        return wbauth.authenticate_session(host=host, source="stabdiag", no_offline=True,
                                           prompt=False, update_session=False) is not None
    except Exception:      # other wandb versions: let wandb.Api() decide
        return True


def _call(uri: str, fn, *, what: str):
    """Run one API call; wandb's and the network's exceptions become one-line InputErrors."""
    for attempt in range(_MAX_RETRIES + 1):
        try:
            return fn()
        except Exception as exc:       # the loader boundary: name the run, not a trace
            if _rate_limited(exc) and attempt < _MAX_RETRIES:
                _sleep(_backoff(exc, attempt))
                continue
            raise InputError(uri, f"cannot {what}: {_describe(exc)}") from None
    raise AssertionError("unreachable")


def _scrub(text: str) -> str:
    """Error text without anything that looks like a credential."""
    return _SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***" if m.group(1) else "***", text)


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    lines = str(exc).strip().splitlines()
    text = _scrub(lines[0])[:200] if lines else ""
    if re.search(r"connect|timeout|timed out|in time|resolve|unreachable|network", name + " " + text, re.I):
        return f"no answer from the W&B API ({name}); check the network"
    if name in ("UsageError", "AuthenticationError") or re.search(r"\b401\b|api key", text, re.I):
        return "W&B did not accept the credentials; run `wandb login` or set WANDB_API_KEY"
    return f"{text} ({name})" if text else name


def _status(exc: BaseException) -> int | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for holder in (exc, getattr(exc, "response", None)):
            code = getattr(holder, "status_code", None)
            if isinstance(code, int):
                return code
        exc = getattr(exc, "exc", None) or exc.__cause__ or exc.__context__
    return None


def _rate_limited(exc: BaseException) -> bool:
    return _status(exc) == 429 or bool(re.search(r"\b429\b|rate.?limit", str(exc), re.I))


def _backoff(exc: BaseException, attempt: int) -> float:
    response = getattr(exc, "response", None)
    retry_after = getattr(response, "headers", {}) or {}
    try:
        return min(120.0, float(retry_after.get("Retry-After")))
    except (TypeError, ValueError, AttributeError):
        return min(60.0, 2.0 ** attempt)


def _history_keys(run, uri: str) -> tuple[dict | None, int]:
    """The run's history keys with their row counts and value types, and its last step."""
    info = None
    try:
        info = run.history_keys
    except Exception:       # an older API without historyKeys: scan everything
        info = None
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = None
    last = info.get("lastStep") if isinstance(info, dict) else None
    if not isinstance(last, int):
        last = _call(uri, lambda: run.lastHistoryStep, what="read the run's last step")
    keys = info.get("keys") if isinstance(info, dict) else None
    return (keys if isinstance(keys, dict) else None), int(last)


def _scan_plan(keys_info: dict) -> list[tuple[list[str], int]]:
    """Groups of numeric keys logged equally often, most frequent first, with their row count."""
    groups: dict[int, list[str]] = {}
    for key, info in keys_info.items():
        if key.startswith("_") or not isinstance(info, dict):
            continue
        counts = info.get("typeCounts") or []
        types = {str(c.get("type", "")).lower() for c in counts if isinstance(c, dict)}
        if types and not types & _NUMERIC_TYPES:
            continue                          # media, tables, text
        groups.setdefault(_row_count(info), []).append(key)
    return [(sorted(keys), count) for count, keys in sorted(groups.items(), reverse=True)]


def _row_count(info) -> int:
    """How many history rows hold a key, from its historyKeys entry."""
    counts = info.get("typeCounts") if isinstance(info, dict) else None
    return sum(int(c.get("count", 0)) for c in counts or () if isinstance(c, dict))


def _fetch_history(run, uri: str, keys_info: dict | None, progress: bool):
    """Per key, the (step, value, wall time) points of the whole history, and notes."""
    points: dict[str, tuple[list, list, list]] = {}
    notes: list[str] = []
    plan = _scan_plan(keys_info) if keys_info is not None else [([], 0)]
    # wall times come along only when every row has one, so that asking never drops a row
    rows = max((count for _, count in plan), default=0)
    extra = ["_step"] + (["_timestamp"] if keys_info and _row_count(keys_info.get("_timestamp")) >= rows
                         else [])
    with _Progress(progress, sum(count for _, count in plan), uri) as bar:
        for keys, count in plan:
            got = _scan(run, uri, keys, extra, points, bar)
            short = [k for k in keys if got.get(k, 0) < count]
            if keys and short and len(keys) > 1:
                bar.grow(len(short) * count)
                for key in short:                 # not logged together after all: one scan each
                    points.pop(_slashed(key, points), None)
                    _scan(run, uri, [key], extra, points, bar)
    if keys_info is None:
        notes.append("the W&B API gave no history key list; scanned the full rows")
    return points, notes


def _slashed(key: str, points: dict) -> str:
    """The name a requested key's points are stored under (a logged dict's dots become '/')."""
    return key if key in points or "." not in key else key.replace(".", "/")


def _scan(run, uri: str, keys: list[str], extra: list[str], points: dict, bar) -> dict[str, int]:
    """One scan_history pass over `keys` (all keys when empty), resumed after HTTP 429."""
    requested = keys + extra if keys else None
    got: dict[str, int] = {}
    next_step = 0
    for attempt in range(_MAX_RETRIES + 1):
        try:
            for row in run.scan_history(keys=requested, page_size=_PAGE_ROWS, min_step=next_step):
                step = row.get("_step")
                if step is None:
                    continue
                _add_row(row, int(step), points, got)
                next_step = int(step) + 1
                bar.advance()
            break
        except Exception as exc:       # wandb raises several types for HTTP errors
            if not _rate_limited(exc) or attempt >= _MAX_RETRIES:
                raise InputError(uri, f"cannot read the run's history: {_describe(exc)}") from None
            _sleep(_backoff(exc, attempt))
    return {k: got.get(k, got.get(k.replace(".", "/"), 0)) for k in keys} if keys else got


def _add_row(row: dict, step: int, points: dict, got: dict) -> None:
    wall = _number(row.get("_timestamp"))
    flat: dict = {}
    _flatten(row, "", flat)
    for key, raw in flat.items():
        if key.startswith("_"):
            continue
        got[key] = got.get(key, 0) + 1
        value = _number(raw)
        if value is None:
            continue
        column = points.get(key)
        if column is None:
            column = points[key] = ([], [], [])
        column[0].append(step)
        column[1].append(value)
        column[2].append(math.nan if wall is None else wall)


def _flatten(obj: dict, prefix: str, out: dict) -> None:
    for key, value in obj.items():
        if value is None:
            continue
        if isinstance(value, dict):
            if "_type" not in value:                   # a logged dict; one with _type is media
                _flatten(value, f"{prefix}{key}/", out)
        else:
            out[prefix + str(key)] = value


def _number(value) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return _TEXT_NUMBERS.get(value.strip().lower())
    return None


def _run_meta(run, entity: str, project: str, run_id: str, last_step: int) -> dict:
    summary = getattr(run, "summary_metrics", None)
    if not isinstance(summary, dict):
        try:
            summary = dict(run.summary)
        except Exception:       # the summary is a nicety, never a reason to fail
            summary = {}
    flat: dict = {}
    _flatten(summary, "", flat)
    config = getattr(run, "config", None)
    config = {k: v for k, v in (config or {}).items() if k != "_wandb"} if isinstance(config, dict) else {}
    return {"format": "wandb-api", "entity": entity, "project": project, "run_id": run_id,
            "display_name": getattr(run, "name", None), "state": getattr(run, "state", None),
            "url": getattr(run, "url", None), "last_step": last_step,
            "config": config, "summary": {k: v for k, v in flat.items() if not k.startswith("_wandb")},
            "fetched_at": time.time()}


class _Progress:
    """A rich progress bar on stderr while paging through history, or nothing."""

    def __init__(self, enabled: bool, total: int, uri: str) -> None:
        self.enabled, self.total, self.uri = enabled, max(total, 1), uri
        self._bar = self._task = None
        self._pending = 0

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(f"fetching {self.uri}", total=self.total)
        return self

    def advance(self) -> None:
        if self._bar is not None:
            self._pending += 1
            if self._pending >= 200:
                self._bar.advance(self._task, self._pending)
                self._pending = 0

    def grow(self, rows: int) -> None:
        if self._bar is not None:
            self.total += rows
            self._bar.update(self._task, total=self.total)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
