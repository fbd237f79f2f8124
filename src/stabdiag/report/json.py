"""The JSON report: the versioned schema of diagnosis.report_dict, for CI and other programs."""

from __future__ import annotations

import json

from .._version import __version__
from ..judge.diagnosis import Diagnosis, report_dict
from .settings import to_dict as settings_dict


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False, **options) -> str:
    doc = report_dict(diagnoses, __version__, fail_on, allow_unknown=allow_unknown)
    if options.get("settings") is not None:      # the config file and every value with its origin
        doc["settings"] = settings_dict(options["settings"])
    # every path given and every folder beside the runs that held nothing readable, with why
    doc["not_read"] = [{"path": path, "reason": why} for path, why in options.get("not_read") or ()]
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
