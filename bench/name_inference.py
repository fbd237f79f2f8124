"""Score name inference against metric names seen in public training code and logs, and exit non-zero
below the targets.

Each name of bench/metric_names.tsv is read as a run of its own (one key) by stabdiag's resolution with
guessing on, so the alias table and the eval patterns answer first, as they do for a real run; the
signal the key feeds is compared with the label.  `eval` in the label matches any eval:<name>; reward
components (reward:<fn>) are a family of their own and count as "no signal" here.

    python bench/name_inference.py          # precision, recall, the alias check; misses and errors
    python bench/name_inference.py -v       # also every name and what it fed

Targets (issue 17): precision >= 98% (of the names mapped to a signal, the share mapped right; also
shown for guesses alone) and recall >= 90% (of the names whose label is a signal, the share mapped
right).  The alias check reads every alias of checklist/signals.toml with name inference alone: where
inference reads an alias at all, it must read it as the alias's own signal.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stabdiag.read.run import Run, Series
from stabdiag.signals.guess import default_patterns, match_key
from stabdiag.signals.resolve import COMPONENT_PREFIX, EVAL_PREFIX, default_alias_table, resolve

NAMES = Path(__file__).resolve().parent / "metric_names.tsv"
PRECISION_TARGET = 0.98
RECALL_TARGET = 0.90


@dataclass(frozen=True)
class Row:
    name: str
    expected: str          # a signal, "eval", or "-"
    seen: str


@dataclass(frozen=True)
class Outcome:
    row: Row
    got: str | None        # the signal the name fed, or None
    guessed: bool          # fed by name inference (not the alias table or the eval patterns)

    @property
    def right(self) -> bool:
        return _same(self.got, self.row.expected)


def _same(got: str | None, expected: str) -> bool:
    if got is None:
        return expected == "-"
    if expected == "eval":
        return got.startswith(EVAL_PREFIX)
    return got == expected


def read_names(path: Path = NAMES) -> list[Row]:
    rows = []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    for line in lines[1:]:                     # the first line is the header
        name, expected, seen = line.split("\t")
        rows.append(Row(name, expected, seen))
    return rows


def read_one(row: Row) -> Outcome:
    """What stabdiag makes of the name alone (a short ramp, so units stay as logged)."""
    series = Series.from_points(row.name, np.arange(1, 21), np.linspace(0.2, 0.4, 20))
    sig = resolve(Run("bench", {row.name: series}))
    got = next((name for name, s in sig.series.items() if s.key == row.name
                and not name.startswith(COMPONENT_PREFIX)), None)
    return Outcome(row, got, got is not None and got in sig.guessed)


def alias_disagreements() -> list[tuple[str, str, str]]:
    """(alias, the signal the alias table gives it, what inference reads) for every alias of
    signals.toml that inference reads as another signal.  The table's own answer is taken from resolution
    without guessing, since an alias listed under two signals goes to the first."""
    table, patterns = default_alias_table(), default_patterns()
    out = []
    for alias in dict.fromkeys(a for sig in table.signals.values() for a in sig.aliases):
        match = match_key(alias, patterns)
        if match is None:
            continue
        series = Series.from_points(alias, np.arange(1, 4), np.ones(3))
        mapped = resolve(Run("alias", {alias: series}), table=table, guess=False).mapping()
        signal = next((name for name, key in mapped.items() if key == alias), None)
        if match.target != signal:
            out.append((alias, signal or "-", match.target))
    return out


@dataclass(frozen=True)
class Score:
    outcomes: tuple[Outcome, ...]
    disagreements: tuple[tuple[str, str, str], ...]

    def _ratio(self, hits: int, total: int) -> float:
        return hits / total if total else 1.0

    @property
    def precision(self) -> float:
        mapped = [o for o in self.outcomes if o.got is not None]
        return self._ratio(sum(o.right for o in mapped), len(mapped))

    @property
    def guess_precision(self) -> float:
        guessed = [o for o in self.outcomes if o.guessed]
        return self._ratio(sum(o.right for o in guessed), len(guessed))

    @property
    def recall(self) -> float:
        labelled = [o for o in self.outcomes if o.row.expected != "-"]
        return self._ratio(sum(o.right for o in labelled), len(labelled))

    def meets_targets(self) -> bool:
        return (self.precision >= PRECISION_TARGET and self.guess_precision >= PRECISION_TARGET
                and self.recall >= RECALL_TARGET and not self.disagreements)


def score(rows: list[Row] | None = None) -> Score:
    rows = rows if rows is not None else read_names()
    return Score(tuple(read_one(r) for r in rows), tuple(alias_disagreements()))


def report(result: Score, verbose: bool = False) -> str:
    outs = result.outcomes
    mapped = [o for o in outs if o.got is not None]
    guessed = [o for o in outs if o.guessed]
    labelled = [o for o in outs if o.row.expected != "-"]
    sources = {o.row.seen.split(" ")[0].split(";")[0] for o in outs}
    lines = [f"{len(outs)} names ({len(labelled)} labelled with a signal, {len(outs) - len(labelled)} with none) "
             f"from {len(sources)} sources",
             f"precision {result.precision:.1%} ({sum(o.right for o in mapped)}/{len(mapped)} mapped names right; "
             f"target {PRECISION_TARGET:.0%})",
             f"  guesses {result.guess_precision:.1%} ({sum(o.right for o in guessed)}/{len(guessed)} "
             "guessed names right)",
             f"recall    {result.recall:.1%} ({sum(o.right for o in labelled)}/{len(labelled)} labelled names mapped "
             f"right; target {RECALL_TARGET:.0%})",
             f"aliases   {len(result.disagreements)} disagreement(s) between inference and signals.toml"]
    wrong = [o for o in mapped if not o.right]
    missed = [o for o in labelled if o.got is None]
    if wrong:
        lines.append("mapped wrong:")
        lines += [f"  {o.row.name!r} -> {o.got} (label {o.row.expected}; {o.row.seen})" for o in wrong]
    if missed:
        lines.append("missed:")
        lines += [f"  {o.row.name!r} (label {o.row.expected}; {o.row.seen})" for o in missed]
    for alias, signal, read in result.disagreements:
        lines.append(f"alias disagreement: {alias!r} is {signal} in signals.toml; inference reads {read}")
    if verbose:
        lines.append("every name:")
        lines += [f"  {'ok ' if o.right else 'BAD'} {o.row.name!r} -> {o.got or '-'}"
                  f"{' (guessed)' if o.guessed else ''}  [label {o.row.expected}]" for o in outs]
    lines.append("targets met" if result.meets_targets() else "TARGETS MISSED")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="list every name and what it fed")
    args = parser.parse_args(argv)
    result = score()
    sys.stdout.write(report(result, args.verbose))
    return 0 if result.meets_targets() else 1


if __name__ == "__main__":
    raise SystemExit(main())
