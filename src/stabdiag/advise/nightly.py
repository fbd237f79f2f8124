"""Nightly selection: the runs of a tracking project that a filter picks, instead of runs named by hand.

    stabdiag check wandb://ENTITY/PROJECT --since 24h --tag nightly --state finished

A project URI (one part short of a run URI) is expanded, before anything is read, into the URIs of the
runs it selects, newest first; each is then read as if it had been named.  The filters are sent to the
tracker's API and applied again here, so a backend that ignores one still gets the right runs.

Trackers plug in through `SELECTORS`: a scheme ("wandb", "mlflow") maps to a function taking the
project URI and the Filters and returning `Selected` runs.  W&B is built in; MLflow registers its own
with `register("mlflow", fn)` from the module that reads MLflow runs, so that
`mlflow://HOST:PORT/EXPERIMENT` takes the same --since/--tag/--state and --baseline last-pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from ..errors import ConfigError, InputError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_PROJECT = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>.+?)/?$")


@dataclass(frozen=True, slots=True)
class Filters:
    """What a selection keeps: runs created after `since`, holding every tag, in `state`."""

    since: datetime | None = None
    tags: tuple[str, ...] = ()
    state: str | None = None

    @property
    def given(self) -> bool:
        return self.since is not None or bool(self.tags) or self.state is not None

    def keeps(self, created: datetime | None, tags, state: str | None) -> bool:
        if self.since is not None and (created is None or created < self.since):
            return False
        if self.state is not None and (state or "").lower() != self.state.lower():
            return False
        return set(self.tags) <= set(tags or ())

    def describe(self) -> str:
        parts = ([f"created since {self.since:%Y-%m-%d %H:%M} UTC"] if self.since else []) + \
            [f"tag {t}" for t in self.tags] + ([f"state {self.state}"] if self.state else [])
        return ", ".join(parts) or "every run"


@dataclass(frozen=True, slots=True)
class Selected:
    """One run a selection picked: the source `check` reads (a run URI), and when it was created."""

    source: str
    created: datetime | None
    name: str = ""


def parse_age(text: str, now: datetime | None = None) -> datetime:
    """`--since 24h` (s, m, h, d or w) as the UTC moment that long ago."""
    match = _AGE.match(text or "")
    if match is None:
        raise ConfigError(f"--since: expected an age such as 24h, 90m, 7d or 2w; got {text!r}")
    now = now or datetime.now(timezone.utc)
    return now - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def filters(since: str | None, tags: list[str], state: str | None, now: datetime | None = None) -> Filters:
    return Filters(parse_age(since, now) if since else None, tuple(t for t in tags if t), state or None)


SELECTORS: dict[str, Callable[[str, Filters], list[Selected]]] = {}


def register(scheme: str, selector: Callable[[str, Filters], list[Selected]]) -> None:
    """Make `scheme://PROJECT` a selection: `selector(uri, filters)` returns the runs, newest first."""
    SELECTORS[scheme] = selector


def is_project(source: str) -> bool:
    """A project URI of a tracker with a selector, not a run URI (`wandb://e/p`, not `wandb://e/p/id`)."""
    match = _PROJECT.match(str(source))
    if match is None or match.group("scheme") not in _KNOWN:
        return False
    return _KNOWN[match.group("scheme")](match.group("rest"))


def _wandb_project(rest: str) -> bool:
    return len([p for p in rest.split("/") if p]) == 2


def _mlflow_project(rest: str) -> bool:
    """`mlflow://HOST:PORT/EXPERIMENT` (not `.../EXPERIMENT/RUN`), and only once MLflow has registered a
    selector: until then the URI is the MLflow reader's, which reads every run of the experiment."""
    return "mlflow" in SELECTORS and len([p for p in rest.split("/") if p]) == 2


_KNOWN: dict[str, Callable[[str], bool]] = {"wandb": _wandb_project, "mlflow": _mlflow_project}


def expand(paths: list[str], chosen: Filters) -> tuple[list[str], list[list[str]]]:
    """The paths with each project URI replaced by the run URIs it selects (newest first), and the
    groups of run URIs, one per project (for --baseline last-pass).  Filters without a project URI
    to apply them to are refused, as is a project whose tracker has no selector."""
    out: list[str] = []
    groups: list[list[str]] = []
    for path in paths:
        if not is_project(path):
            out.append(path)
            continue
        scheme = str(path).split("://", 1)[0]
        selector = SELECTORS.get(scheme)
        if selector is None:
            raise ConfigError(f"{path}: selecting runs from a {scheme} project is not available in this "
                              "install; name the runs one by one")
        picked = selector(str(path), chosen)
        if not picked:
            raise InputError(str(path), f"no run matches ({chosen.describe()})")
        groups.append([s.source for s in picked])
        out += groups[-1]
    if chosen.given and not groups:
        raise ConfigError("--since/--tag/--state select runs of a project: give one, e.g. "
                          "wandb://ENTITY/PROJECT")
    return out, groups


def last_pass(diagnoses: list, groups: list[list[str]]) -> list[tuple[object, object]]:
    """(baseline, run) pairs for --baseline last-pass: each run of a selection against the newest
    passing run created before it in the same selection; a run with none is left out."""
    pairs = []
    for group in groups:
        ordered = [d for source in group for d in diagnoses if _read_from(d, source)]      # newest first
        for i, diag in enumerate(ordered):
            before = next((d for d in ordered[i + 1:] if d.verdict == "pass"), None)
            if before is not None:
                pairs.append((before, diag))
    return pairs


def _read_from(diag, source: str) -> bool:
    """Whether a diagnosis is of the run `source` names: the URI itself, or a file under the folder."""
    folder = source.rstrip("/") + "/"
    return any(s == source or s.startswith(folder) for s in diag.sources)


# --- W&B --------------------------------------------------------------------------------------------------

def _created(value) -> datetime | None:
    """W&B's created_at ("2026-12-01T06:00:00", UTC, sometimes with Z) as an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def wandb_filters(chosen: Filters) -> dict:
    """The filters in the W&B public API's query language (MongoDB-like), sent with `api.runs`."""
    query: list[dict] = []
    if chosen.since is not None:
        query.append({"createdAt": {"$gt": chosen.since.strftime("%Y-%m-%dT%H:%M:%S")}})
    query += [{"tags": tag} for tag in chosen.tags]
    if chosen.state is not None:
        query.append({"state": chosen.state})
    return {"$and": query} if query else {}


def select_wandb(uri: str, chosen: Filters) -> list[Selected]:
    from ..read.formats.wandb._online import _call, _open_api

    entity, project = [p for p in uri.split("://", 1)[1].split("/") if p]
    api = _open_api(uri)
    listed = _call(uri, lambda: list(api.runs(f"{entity}/{project}", filters=wandb_filters(chosen),
                                              order="-created_at")), what="list the project's runs")
    picked = []
    for run in listed:
        created = _created(getattr(run, "created_at", None))
        if chosen.keeps(created, getattr(run, "tags", ()), getattr(run, "state", None)):
            picked.append(Selected(f"wandb://{entity}/{project}/{run.id}", created, str(getattr(run, "name", ""))))
    far_past = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(picked, key=lambda s: s.created or far_past, reverse=True)


register("wandb", select_wandb)
