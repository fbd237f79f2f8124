"""`python -m stabdiag.probe ...` runs the probe on its own (e.g. under `torchrun -m stabdiag.probe`)."""

from .cli import app

app(prog_name="stabdiag probe")
