"""`stabdiag signals`: which key feeds each canonical signal, its points, range and non-finite count."""

from __future__ import annotations

import io
import json
import math
import shlex

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..signals.resolve import Signals, is_guess_note
from ._escape import terminal as shown


def _fmt(x: float) -> str:
    return str(x) if not math.isfinite(x) else f"{x:.4g}"


_HEADLINE = ("reward", "kl", "loss", "grad_norm", "eval_loss")


def framework_line(sig: Signals) -> str:
    """'verl detected; reward <- critic/score/mean, kl <- actor/kl_loss, ...' for the signals that matter most."""
    shown = [f"{name} <- {sig.series[name].key}" + (" (guessed)" if name in sig.guessed else "")
             for name in _HEADLINE if name in sig.series]
    evals = [name for name in sig.series if name.startswith("eval:")]
    if evals:
        shown.append(f"{len(evals)} eval(s): " + ", ".join(evals))
    head = f"{sig.framework} detected" if sig.framework else "framework not recognised"
    return head + ("; " + ", ".join(shown) if shown else "; no key signal mapped")


def signals_dict(resolved: list[Signals]) -> dict:
    runs = []
    for sig in resolved:
        entries = {}
        for name, s in sig.series.items():
            entries[name] = {"key": s.key, "source": s.source or None, "unit": sig.units.get(name),
                             "guessed": name in sig.guessed, "guess_pattern": sig.guessed.get(name), "points": len(s),
                             "first_step": int(s.steps[0]) if len(s) else None,
                             "last_step": int(s.steps[-1]) if len(s) else None, "nonfinite": s.nonfinite_count}
        runs.append({"run": sig.run.name, "signals": entries, "unmapped": list(sig.unmapped),
                     "ambiguous": {name: list(keys) for name, keys in sig.ambiguous.items()},
                     "notes": list(sig.notes), "framework": sig.framework})
    from .._version import __version__
    from .schema import SIGNALS_SCHEMA_VERSION

    return {"stabdiag_version": __version__, "schema_version": SIGNALS_SCHEMA_VERSION, "runs": runs}


def render_signals(resolved: list[Signals], format: str = "text", width: int = 100) -> str:
    if format == "json":
        return json.dumps(signals_dict(resolved), indent=2) + "\n"
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, highlight=False, emoji=False)
    for i, sig in enumerate(resolved):
        if i:
            console.print()
        console.print(f"{shown(sig.run.name)}: {len(sig.series)} signals from {len(sig.run.series)} keys",
                      markup=False)
        console.print(shown(framework_line(sig)), markup=False)
        origins = list(dict.fromkeys(s.source for s in sig.series.values() if s.source))
        per_signal = len(origins) > 1
        if len(origins) == 1:
            console.print(f"source: {shown(origins[0])}", markup=False)
        guessing = bool(sig.guessed)
        table = Table(box=None, pad_edge=False)
        for col in (("signal", "key") + (("guessed by",) * guessing) + ("points", "steps", "first", "last", "NaN/Inf")
                    + (("source",) * per_signal)):
            table.add_column(col, overflow="fold")
        for name, s in sig.series.items():
            cells = (name, s.key, *((sig.guessed.get(name, ""),) * guessing), str(len(s)),
                     f"{s.steps[0]}-{s.steps[-1]}" if len(s) else "",
                     _fmt(s.values[0]) if len(s) else "", _fmt(s.values[-1]) if len(s) else "",
                     str(s.nonfinite_count), *((s.source,) * per_signal))
            table.add_row(*(Text(shown(c)) for c in cells))      # Text: a name is never rich markup
        console.print(table)
        _print_guesses(console, sig)
        decided = [f"{name} {unit}" for name, unit in sig.units.items() if unit != "as logged"]
        judged_as_logged = [name for name, unit in sig.units.items() if unit == "as logged"]
        if decided or judged_as_logged:
            console.print(shown("units: " + "; ".join(decided + ([", ".join(judged_as_logged) + " as logged (not a "
                                                                         "percentage)"] if judged_as_logged else []))),
                          markup=False)
        if sig.unmapped:
            console.print(shown("unmapped: " + ", ".join(sig.unmapped)), markup=False)
        for note in sig.notes:
            if not is_guess_note(note):
                console.print(f"note: {shown(note)}", markup=False)
    # rich pads table cells to the column width: no line ends in spaces (piped, diffed, grepped)
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))


def _print_guesses(console: Console, sig: Signals) -> None:
    """The signals guessed from names (each with the pattern that read it), and the signals whose
    candidates tied, each candidate with the --map line that settles it."""
    if sig.guessed:
        console.print(f"guessed from names: {len(sig.guessed)} signal(s), by the pattern under 'guessed by'; "
                      "check them: --map SIGNAL=KEY corrects one, --no-guess turns guessing off")
    for name, keys in sig.ambiguous.items():
        console.print(f"not guessed: {len(keys)} names fit {shown(name)} equally; pick one:", markup=False)
        for key in keys:
            console.print(f"  --map {shown(shlex.quote(f'{name}={key}'))}", markup=False)
