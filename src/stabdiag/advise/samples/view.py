"""`stabdiag samples RUN --step S`: one step's samples, each with its reward and features, as plain text.

Nothing from a sample reaches a terminal or a CI log unescaped: every piece of sample text goes through
`_shown`, the terminal policy of stabdiag.report._escape (control characters, bidi overrides and `::` shown
as escapes).  report sits above advise, so the policy is restated here and a test holds the two equal."""

from __future__ import annotations

import math
import os
import re

from ...errors import InputError
from ...read.samples import SampleSource
from .features import features
from .window import read_window

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|::")


def _shown(text: str) -> str:
    """Text from a sample as a terminal may show it: the escaping policy of stabdiag.report._escape.visible
    (duplicated because advise may not import report; tests/test_samples_report.py holds the two equal)."""
    def sub(match: re.Match) -> str:
        char = match.group()
        if char == "::":
            return ":\\x3a"
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if char in named:
            return named[char]
        return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"

    return _CONTROL.sub(sub, text)


def _sample_files(run_path: str) -> list[str]:
    """The sample files at a path: the file itself, or those discovery attaches to the run(s) under it."""
    if os.path.isfile(run_path):
        return [run_path]
    from ...read.assemble import discover

    files: list[str] = []
    for run in discover(run_path):
        files.extend(run.samples)
    return files


def window_text(run_path: str, *, step: int, width: int = 100, limit: int = 20) -> str:
    """The samples logged at `step` (the nearest logged step when that one has none, said so) with reward,
    advantage and features, at most `limit` of them, each answer cut to fit `width`.  InputError when the
    path holds no samples."""
    source = SampleSource.of(_sample_files(run_path))
    if source is None:
        raise InputError(run_path, "no logged samples found (TRL completions parquet, W&B tables, verl rollout "
                                   "dumps, Tinker rollout summaries, or a JSONL/Parquet with step and completion)")
    logged = source.steps()
    if not len(logged):
        raise InputError(run_path, "the sample files hold no step")
    nearest = int(logged[abs(logged - step).argmin()])
    window = read_window(source, nearest, nearest, max_samples=max(limit, 1) * 8)
    samples = window.samples[:limit]
    table = features(samples)
    lines = [f"samples at step {nearest} ({source.kind}: {window.logged} logged, {len(samples)} shown)"]
    if nearest != step:
        lines.append(f"note: no samples at step {step}; the nearest logged step is {nearest}")
    lines += [f"note: {_shown(n)}" for n in window.notes]
    shown_features = [n for n in ("tokens", "words", "chars", "truncated", "repeated_ngrams", "same_in_group")
                      if n in table.columns]
    markers = [n for n in table.binary if n not in shown_features and not n.startswith(("has:", "opens:"))]
    for i, sample in enumerate(samples):
        row = table.row(i)
        head = [f"#{i + 1}", f"reward {_num(sample.reward)}"]
        if math.isfinite(sample.advantage):
            head.append(f"adv {sample.advantage:+.2f}")
        head += [f"{n} {_num(row[n])}" for n in shown_features if math.isfinite(row[n])]
        head += [table.labels[n] for n in sorted(markers) if row.get(n) == 1.0]
        if sample.components:
            head.append(" ".join(f"{_shown(k)}={_num(v)}" for k, v in sorted(sample.components.items())))
        lines.append("  ".join(head))
        if sample.prompt:
            lines.append("  prompt: " + _cut(_shown(sample.prompt), width - 10))
        body = sample.completion if sample.completion is not None else (
            "token ids " + " ".join(map(str, (sample.response_ids or ())[:60])))
        lines.append("  answer: " + _cut(_shown(body), width - 10))
        lines.append(f"  at {_shown(sample.where)}")
    return "\n".join(lines) + "\n"


def _num(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _cut(text: str, width: int) -> str:
    width = max(20, width)
    return text if len(text) <= width else text[:width - 1] + "…"
