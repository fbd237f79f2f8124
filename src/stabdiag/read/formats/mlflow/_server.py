"""An MLflow tracking server, through the mlflow client (the optional `mlflow` extra, imported only here).

    mlflow://HOST[:PORT]/EXPERIMENT[/RUN]          EXPERIMENT a name or an id, RUN a name or an id
    mlflows://HOST[:PORT]/EXPERIMENT[/RUN]         the same over https
    http(s)://HOST[:PORT]/#/experiments/ID[/runs/RUN_ID]   a run or experiment page of the MLflow UI

The server has no call for all of a run's metrics at once, so each key's history is one request.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

import numpy as np

from ....errors import InputError, MissingExtraError
from ...run import Run
from ._common import build_run


def handles_uri(uri: str) -> bool:
    parts = urlsplit(uri)
    if parts.scheme in ("mlflow", "mlflows"):
        return True
    return parts.scheme in ("http", "https") and "/experiments/" in (parts.fragment or parts.path)


def _target(uri: str) -> tuple[str, str | None, str | None]:
    """(tracking URI, experiment, run) of a source URI."""
    parts = urlsplit(uri)
    if parts.scheme in ("mlflow", "mlflows"):
        scheme = "https" if parts.scheme == "mlflows" else "http"
        names = [unquote(p) for p in parts.path.split("/") if p]
        if not parts.netloc or not names or len(names) > 2:
            raise InputError(uri, "expected mlflow://HOST[:PORT]/EXPERIMENT[/RUN]")
        return f"{scheme}://{parts.netloc}", names[0], names[1] if len(names) > 1 else None
    route = [p for p in (parts.fragment or parts.path).split("/") if p]
    experiment = run = None
    for i, part in enumerate(route[:-1]):
        if part == "experiments":
            experiment = route[i + 1]
        elif part == "runs":
            run = route[i + 1]
    if experiment is None:
        raise InputError(uri, "expected an MLflow UI address with /experiments/ID in it")
    return f"{parts.scheme}://{parts.netloc}", experiment, run


def _client(tracking_uri: str):
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise MissingExtraError("reading an MLflow tracking server needs the mlflow client", "mlflow") from None
    return MlflowClient(tracking_uri=tracking_uri)


def _experiment(client, uri: str, wanted: str):
    found = client.get_experiment_by_name(wanted)
    if found is None and wanted.isdigit():
        try:
            found = client.get_experiment(wanted)
        except Exception:      # noqa: BLE001 - the server says "not found" with its own exception types
            found = None
    if found is None:
        raise InputError(uri, f"no MLflow experiment {wanted!r} on this server")
    return found


def _runs(uri: str):
    """(client, experiment name, [runs]) of the runs a URI names."""
    tracking, experiment, run = _target(uri)
    client = _client(tracking)
    exp = _experiment(client, uri, experiment)
    runs = [r for r in client.search_runs([exp.experiment_id], max_results=5000)
            if run is None or run in (r.info.run_id, r.info.run_name)]
    if not runs:
        raise InputError(uri, f"no MLflow run {run!r} in experiment {exp.name!r}" if run else
                              f"MLflow experiment {exp.name!r} has no runs")
    return client, exp.name, runs


def run_uris(uri: str) -> list[tuple[str, str]]:
    """(a URI naming one run, its run name) for every run the URI names."""
    tracking, _, _ = _target(uri)
    scheme, _, netloc = tracking.partition("://")
    _, experiment, runs = _runs(uri)
    prefix = f"{'mlflows' if scheme == 'https' else 'mlflow'}://{netloc}/{quote(experiment, safe='')}"
    return [(f"{prefix}/{r.info.run_id}", r.info.run_name or r.info.run_id) for r in runs]


def load_uri(uri: str, **options) -> Run:
    """One run: a URI that names exactly one (as `run_uris` gives them)."""
    client, experiment, runs = _runs(uri)
    if len(runs) != 1:
        raise InputError(uri, f"names {len(runs)} MLflow runs; check it with stabdiag check to read each")
    data = runs[0]
    run_id = data.info.run_id
    keys, steps, values, stamps = [], [], [], []
    for key in sorted(data.data.metrics):
        for m in client.get_metric_history(run_id, key):
            keys.append(key)
            steps.append(m.step)
            values.append(m.value)
            stamps.append(m.timestamp)
    return build_run(uri, name=data.info.run_name or run_id, run_id=run_id, experiment=experiment,
                     status=data.info.status, keys=keys, steps=steps, values=np.array(values, dtype=np.float64),
                     timestamps=stamps, params=dict(data.data.params), tags=dict(data.data.tags),
                     store="tracking server")
