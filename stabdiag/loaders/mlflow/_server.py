"""An MLflow tracking server, through the mlflow client (the optional `mlflow` extra, imported only here).

    mlflow://HOST[:PORT]/EXPERIMENT[/RUN]          EXPERIMENT a name or an id, RUN a name or an id
    mlflows://HOST[:PORT]/EXPERIMENT[/RUN]         the same over https
    http(s)://HOST[:PORT]/#/experiments/ID[/runs/RUN_ID]   a run or experiment page of the MLflow UI

The server has no call for all of a run's metrics at once, so each key's history is one request.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import numpy as np

from ...errors import InputError, MissingExtraError
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


def run_uris(uri: str) -> list[tuple[str, str]]:
    """(a URI naming one run, its run name) for every run the URI names."""
    tracking, experiment, run = _target(uri)
    client = _client(tracking)
    exp = _experiment(client, uri, experiment)
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    out = []
    for r in runs:
        name = r.info.run_name or r.info.run_id
        if run is None or run in (r.info.run_id, name):
            out.append((f"{uri.split('#')[0].rstrip('/')}#run_id={r.info.run_id}", name))
    if not out:
        raise InputError(uri, f"no MLflow run {run!r} in experiment {experiment!r}" if run else
                              f"MLflow experiment {experiment!r} has no runs")
    return out


def load_uri(uri: str, **options) -> Run:
    """One run: a URI from `run_uris`, or one that names exactly one run."""
    if "#run_id=" not in uri:
        found = run_uris(uri)
        if len(found) != 1:
            raise InputError(uri, f"names {len(found)} MLflow runs; check it with stabdiag check to read each")
        uri = found[0][0]
    base, _, run_id = uri.partition("#run_id=")
    tracking, experiment, _ = _target(base)
    client = _client(tracking)
    data = client.get_run(run_id)
    keys, steps, values, stamps = [], [], [], []
    for key in sorted(data.data.metrics):
        for m in client.get_metric_history(run_id, key):
            keys.append(key)
            steps.append(m.step)
            values.append(m.value)
            stamps.append(m.timestamp)
    return build_run(base, name=data.info.run_name or run_id, run_id=run_id, experiment=str(experiment),
                     status=data.info.status, keys=keys, steps=steps, values=np.array(values, dtype=np.float64),
                     timestamps=stamps, params=dict(data.data.params), tags=dict(data.data.tags),
                     store="tracking server")
