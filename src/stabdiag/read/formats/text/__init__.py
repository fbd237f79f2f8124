"""Console logs that frameworks print, recognised by content (the first 512 KB), not by name:

- nanoGPT family                    modded-nanogpt record logs (`step:N/M train_loss:... val_loss:...`
  after the pasted script), llm.c's console, Karpathy's nanoGPT (see nanogpt)
- Megatron-LM / Megatron-DeepSpeed  `iteration 100/ 1000 | ... | lm loss: 2.3E+00 | grad norm: ... |`
  and `validation loss at iteration N | lm loss value: ... |` (see _megatron)
- DeepSpeed-Chat PPO                `epoch: 0|step: 42|ppo_ep: 1|act_loss: ...|cri_loss: ...` followed by
  `average reward score: ...`; its SFT, reward-model and DPO steps (`***** Evaluating perplexity,
  Epoch 1/16 *****`, DeepSpeed's timer lines; see dschat)
- llm.c main.log                    `s:0 trl:11.0 lr:0.0006 norm:1.2` and `s:250 tel:6.17`
- verl console                      `step:83 - actor/entropy:0.53 - actor/kl_loss:nan - ...`, with or
  without a `(main_task pid=...)` prefix
- HF Trainer / TRL console          `{'loss': 1.14, 'grad_norm': 2.7, 'learning_rate': ..., 'epoch': 0.91}`,
  transformers 5's quoted values, tqdm on the same line, dicts wrapped over lines (see hf_console)
- hand-written training loops       `Step 12/500 | loss: 0.31 | reward: 0.42`, `iter 12: loss 0.31, ...`,
  `Average Reward: 0.42` once per step (see loop)

The formats are tried in that order, most specific first.  A log that mixes console noise with metric
lines is normal: the noise is skipped and counted, and a note says how many metric lines were read.
Once a file is recognised, a line that cannot be read is skipped and counted, never fatal; `load`
raises InputError only when no metric line at all is found.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from ....errors import InputError
from ..._textio import unfinished_line_note, without_unfinished_line
from ...ending.console import ending_of_console, planned_of_console
from ...run import Run, run_name_for
from .. import _common
from .._common import Points
from . import _console, _megatron, dschat, hf_console, loop, nanogpt
from ._pairs import lines_text, series_by_shape

_DSCHAT = re.compile(r"epoch:\s*(\d+)\s*\|\s*step:\s*(\d+)\s*\|(.*)")
_DSCHAT_REWARD = re.compile(r"average reward score:\s*(\S+)")
_LLMC = re.compile(r"^s:(\d+)\s+(\w+:\S+(?:\s+\w+:\S+)*)\s*$")    # pairs split by blanks: no backtracking
# the sniffers' forms of Megatron's, _DSCHAT's, _LLMC's and verl's records: a literal first, blanks on the line
_MEGATRON_SNIFF = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|")
_DSCHAT_SNIFF = re.compile(r"epoch:[ \t]*\d+[ \t]*\|[ \t]*step:[ \t]*\d+[ \t]*\|")
_LLMC_SNIFF = re.compile(r"\n[ \t]*s:\d+[ \t]+\w+:\S+(?:[ \t]+\w+:\S+)*[ \t]*(?=\n)")
_VERL_SNIFF = re.compile(r"step:\d+[ \t]+-[ \t]+[^\n]*:")
_VERL_HEAD = r"step:(\d{1,18})[ \t]+-[ \t]+"     # a literal first: see _pairs
_VERL_ROW = re.compile(_VERL_HEAD + r"([^\n]*)")
_OVERFLOW = re.compile(r"OVERFLOW!|Skipping step", re.IGNORECASE)
_SNIFF_BYTES = 512 * 1024   # a launcher's argument and config dump can run to a few hundred KB
_FORMAT_NAMES = {"nanogpt": "nanoGPT-family console",
                 "megatron": "Megatron console", "dschat": "DeepSpeed-Chat console",
                 "dschat_stage": dschat.FORMAT, "llmc": "llm.c main.log",
                 "verl": "verl console", "hf": hf_console.FORMAT, "loop": loop.FORMAT}


def _format_of(text: str) -> str | None:
    # the record patterns are searched for in the whole text, each behind a literal it must contain,
    # which str's `in` finds at C speed: a 2 MB verl log is sniffed in milliseconds, not line by line
    if nanogpt.sniff(text):
        return "nanogpt"
    if "iteration" in text and _MEGATRON_SNIFF.search(text):
        return "megatron"
    if "epoch:" in text and _DSCHAT_SNIFF.search(text):
        return "dschat"
    if "***** Evaluating " in text and dschat.sniff(text):
        return "dschat_stage"
    if "s:" in text and _two(_LLMC_SNIFF.finditer(lines_text(text))):
        return "llmc"
    if "step:" in text and _VERL_SNIFF.search(text):
        return "verl"
    if hf_console.sniff(text):
        return "hf"
    if loop.sniff(text):
        return "loop"
    return None


def _two(found) -> bool:
    return next(found, None) is not None and next(found, None) is not None


def can_load(path: str) -> bool:
    if _common.is_not_log(path):
        return False
    text = _common.head(path, _SNIFF_BYTES, stray_nuls=True)
    if text is None:
        return False
    # an HF console beside trainer_state.json is read too: assembly deduplicates the copies and takes
    # the console's steps from the exact files (stabdiag.read.sources)
    return _format_of(text) is not None


def load(path: str, **options) -> Run:
    return load_text(path, _common.read_text(path))


def load_text(path: str, text: str) -> Run:
    """Read a console log's text (all of it so far: stabdiag watch keeps what it has read of a growing
    log, since a console's steps and ending are read from the whole of it)."""
    # a format whose records start past the head is looked for in the whole text (the same text if small)
    fmt = _format_of(text[:_SNIFF_BYTES]) or (_format_of(text) if len(text) > _SNIFF_BYTES else None)
    if fmt is None:
        raise InputError(path, "no metric lines of a known console format found")
    complete, cut = without_unfinished_line(text)
    try:
        run = _read_as(fmt, path, complete)
    except InputError as exc:
        if cut is None:
            raise
        raise InputError(path, f"{exc.problem}; the last line ({cut}) has no newline yet (the file is still being "
                               "written?) and was not read", line=exc.line, key=exc.key) from None
    ending = ending_of_console(text, os.path.basename(path))     # the whole text: a crash's last words count
    if ending is not None:
        run.meta["ending"] = ending
    planned = planned_of_console(text)
    if planned is not None:
        run.meta["planned"] = replace(planned, file=path)
    if cut is not None and _has_numbers(text[len(complete):]):
        run = replace(run, notes=run.notes + (unfinished_line_note(path, cut),))
    return run


def read_console(path: str, text: str) -> Run:
    """Console text already in memory (a notebook's stored cell outputs) read as its format; InputError
    naming `path` when it holds no metric lines of a known format."""
    fmt = _format_of(text[:_SNIFF_BYTES]) or (_format_of(text) if len(text) > _SNIFF_BYTES else None)
    if fmt is None:
        raise InputError(path, "no metric lines of a known console format found")
    return _read_as(fmt, path, text)


def is_console(text: str) -> bool:
    """The text holds metric lines of a console format this package reads."""
    return _format_of(text[:_SNIFF_BYTES]) is not None


def _read_as(fmt: str, path: str, text: str) -> Run:
    reader = {"nanogpt": nanogpt.read, "megatron": _megatron.read, "dschat": _read_dschat,
              "dschat_stage": dschat.read, "llmc": _read_llmc, "verl": _read_verl, "hf": hf_console.read,
              "loop": loop.read}[fmt]
    try:
        return reader(path, text)
    except (ValueError, IndexError, KeyError, OverflowError, ZeroDivisionError) as exc:
        # a reader's own slip on an odd line must not stop the other files of the run from loading
        raise InputError(path, f"could not be read as {_FORMAT_NAMES[fmt]} ({type(exc).__name__}: {exc}); "
                               "please report this file") from None


def _has_numbers(line: str) -> bool:
    """A line with a number once progress bars are cut out: what a reader might have taken."""
    return any(ch.isdigit() for _, piece in _console.segments(line) for ch in piece)


def _summary_note(path: str, fmt: str, metric_lines: int, total: int) -> str:
    skipped = total - metric_lines
    return (f"{os.path.basename(path)}: read {metric_lines} metric line(s) as {fmt}"
            + (f"; skipped {skipped} other line(s)" if skipped else ""))


def _read_dschat(path: str, text: str) -> Run:
    records: dict[int, dict[str, float]] = {}
    offset, last_epoch, current, metric_lines, overflows = 0, None, None, 0, 0
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _DSCHAT.search(line)
        if match:
            epoch, step = int(match.group(1)), int(match.group(2))
            if last_epoch is not None and epoch != last_epoch:
                offset = max(records, default=-1) + 1
            last_epoch, current = epoch, offset + step
            fields = records.setdefault(current, {})   # a later ppo_ep of the same step overwrites
            for part in match.group(3).split("|"):
                key, sep, raw = part.partition(":")
                value = _common.number(raw) if sep else None
                if value is not None and key.strip() != "ppo_ep":
                    fields[key.strip()] = value
            metric_lines += 1
            continue
        reward = _DSCHAT_REWARD.search(line)
        if reward and current is not None and _common.number(reward.group(1)) is not None:
            records[current]["average reward score"] = _common.number(reward.group(1))
            metric_lines += 1
        elif _OVERFLOW.search(line):
            overflows += 1
    points = Points()
    for step, fields in records.items():
        for key, value in fields.items():
            points.add(step, key, value)
    notes = [_summary_note(path, "DeepSpeed-Chat console", metric_lines, len(lines))]
    if overflows:
        notes.append(f"{os.path.basename(path)}: {overflows} fp16 loss-scale overflow message(s) "
                     "(DeepSpeed skips those steps; early in training this is normal)")
    return points.to_run(path, framework="DeepSpeed-Chat", fmt="DeepSpeed-Chat console", notes=notes)


def _read_llmc(path: str, text: str) -> Run:
    points, metric_lines = Points(skip_repeats=True), 0
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _LLMC.match(line.strip())
        if not match:
            continue
        step = int(match.group(1))
        for token in match.group(2).split():
            key, _, raw = token.partition(":")
            value = _common.number(raw)
            if value is not None:
                points.add(step, key, value)
        metric_lines += 1
    notes = [_summary_note(path, "llm.c main.log", metric_lines, len(lines))]
    return points.to_run(path, framework="llm.c", fmt="llm.c main.log", notes=notes)


def _read_verl(path: str, text: str) -> Run:
    if "\x1b" in text:                     # Ray colours its `(TaskRunner pid=...)` prefixes
        text = _console.ANSI.sub("", text)
    text = lines_text(text)
    rows = [m.groups() for m in _VERL_ROW.finditer(text) if text[m.start() - 1] in " \t)\n"]  # `step:` starts a word
    series = series_by_shape(text, rows, _VERL_HEAD, " - ")
    if not series:
        raise InputError(path, "no metric lines found (read as verl console)")
    notes = [_summary_note(path, "verl console", len(rows), text.count("\n") + 1)]
    return Run(run_name_for(path), series, (path,), {"format": "verl console", "framework": "verl"}, tuple(notes))
