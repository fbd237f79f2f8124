"""`stabdiag samples`: the samples a run logged at one step, each with its reward and features
(stabdiag.advise.samples.window_text), to read beside a finding's evidence."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import sys
from typing import Optional

import typer

from ..errors import ConfigError, InputError
from ._guard import guarded

MIN_WIDTH = 40          # narrower than this, an answer cut to fit shows almost nothing of itself


def samples(
    run: str = typer.Argument(..., metavar="RUN", help="A run directory, or a file of logged samples "
                                                       "(TRL completions, W&B tables, verl rollout dumps, "
                                                       "JSONL/Parquet with step and completion)."),
    step: int = typer.Option(..., "--step", metavar="S", help="The training step to show (the nearest "
                                                              "logged step when S has none, said so)."),
    width: Optional[int] = typer.Option(None, "--width", metavar="N", help="Cut each prompt and answer to "
                                                                           "fit N columns (default: the "
                                                                           "terminal's, else 100)."),
    limit: int = typer.Option(20, "--limit", metavar="N", help="Show at most N samples of the step."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Print the samples a run logged at a step, each with its reward, advantage and features."""
    def body() -> None:
        from ..advise.samples import window_text
        from ._screen import width as screen_width

        if limit < 1:
            raise ConfigError(f"--limit: expected a number of samples, 1 or more; got {limit}")
        if width is not None and width < MIN_WIDTH:
            raise ConfigError(f"--width: expected {MIN_WIDTH} columns or more; got {width}")
        try:     # window_text escapes every piece of sample text (control characters, bidi overrides, `::`)
            text = window_text(run, step=step, width=width or screen_width(), limit=limit)
        except (OSError, ValueError) as exc:
            # a sample file the readers choke on (a truncated parquet: pyarrow's ArrowInvalid) is the
            # input's fault, named as the check names it in the samples' evidence, never an internal error
            why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
            raise InputError(run, f"could not read the samples: {why}") from None
        sys.stdout.write(text)

    guarded(body, debug)
