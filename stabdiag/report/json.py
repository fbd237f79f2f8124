"""The JSON report: the versioned schema of diagnosis.report_dict, for CI and other programs."""

from __future__ import annotations

import json

from .._version import __version__
from ..diagnosis import Diagnosis, report_dict


def render(diagnoses: list[Diagnosis], **options) -> str:
    return json.dumps(report_dict(diagnoses, __version__), indent=2, allow_nan=False) + "\n"
