"""The HF Trainer / TRL console: the dict every `logging_steps` that `Trainer.log` prints.

    transformers 4.x   {'loss': 1.1409, 'grad_norm': 2.757542133331299, 'learning_rate': 1.8e-05, 'epoch': 0.91}
    transformers 5.x   {'loss': '4.611', 'grad_norm': '1.071', 'learning_rate': '9.5e-05', 'epoch': '0.2'}

5.x formats every float with `.4g` and prints it quoted (`'nan'`, `'inf'` too).  The dict shares its
line with tqdm bars (`\\r` inside the line, or glued to a bar in a paste) and may be wrapped over
several lines by a terminal or `pprint`; both are undone (see _console).  Keys stay as printed: the
assembly step matches them against trainer_state.json, TensorBoard and W&B.

The dicts carry no step, so the step axis is taken from the best source the log offers and recorded in
`run.meta["step_axis"]`:

- "printed"        every training dict has a `step` / `global_step` key or a step counter before it;
- "epoch"          epoch x steps per epoch, from the Trainer banner (`Num update steps per epoch` in
                   5.x, `Total optimization steps` / `Num Epochs` in both), snapped to `logging_steps`
                   when the printed epoch is too coarse to tell steps apart;
- "logging_steps"  record number x logging_steps (from the arguments dump or the command line);
- "counted"        record number.

An eval dict (`eval_*` keys) belongs to the training step it follows, not to a new one; on the epoch
axis its own epoch is exact (evals run at epoch ends or every eval_steps) and is used.  The final
`train_runtime` dict is the run's summary, kept in `run.meta["summary"]`, not a training point.
"""

from __future__ import annotations

import math
import os
import re

from ....errors import InputError
from ...run import Run
from .. import _common
from .._common import Points
from . import _console, loop

_OPEN = re.compile(r"(?<![=\w])\{'")              # a dict repr, not `fsdp_config={'...`
_PAIR = re.compile(r"'((?:[^'\\]|\\.)+)'\s*:\s*('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,}]+)")
_WRAPPER = re.compile(r"^[\w.]+\((.+)\)$")       # np.float64(0.5), tensor(0.5)
_MAX_WRAPPED = 80                                 # pprint puts one key a line; TRL logs ~40 keys
_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}
_EVAL_PREFIXES = ("eval_", "test_", "predict_")
_STEP_KEYS = ("global_step", "step")
_EPOCHS = re.compile(r"Num Epochs\s*=\s*([\d,]+)")
_TOTAL = re.compile(r"Total optimization steps\s*=\s*([\d,]+)")
_PER_EPOCH = re.compile(r"Num update steps per epoch\s*=\s*([\d,]+)")     # transformers >= 5
_LOGGING_STEPS = re.compile(r"\blogging[_-]steps\b['\"]?\s*[=:]?\s*['\"]?(\d+(?:\.\d+)?(?:e-?\d+)?)(?![\d.])")
_EVAL_STEPS = re.compile(r"\beval[_-]steps\b['\"]?\s*[=:]?\s*['\"]?(\d+)(?![\d.])")
_FIRST_STEP = re.compile(r"\blogging[_-]first[_-]step\b['\"]?(?:\s*[=:]?\s*['\"]?(true|false)\b|(?=\s+--|\s*\\?\s*$))",
                         re.IGNORECASE | re.MULTILINE)
FORMAT = "HF Trainer console"


class _Record:
    """One printed dict: its values, the line it started on, and what the text says about its step."""

    __slots__ = ("line", "values", "raw_epoch", "quoted", "printed_step", "kind")

    def __init__(self, line: int, values: dict[str, float], raw_epoch: str | None, quoted: bool,
                 printed_step: int | None) -> None:
        self.line, self.values, self.raw_epoch, self.quoted = line, values, raw_epoch, quoted
        self.printed_step = printed_step
        keys = values.keys()
        self.kind = ("summary" if "train_runtime" in keys or ("train_loss" in keys and "loss" not in keys)
                     else "eval" if any(k.startswith(_EVAL_PREFIXES) for k in keys) and "loss" not in keys
                     else "train")


def _dict_texts(segments: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """(line, text before the dict, dict text) for every dict repr, joining a dict wrapped over lines:
    after a `,` the break replaced a space, elsewhere the terminal cut a token in two."""
    out: list[tuple[int, str, str]] = []
    i = 0
    while i < len(segments):
        line, seg = segments[i]
        i += 1
        match = _OPEN.search(seg)
        if match is None:
            continue
        prefix, body = seg[: match.start()], seg[match.start():]
        joined = 0
        while "}" not in body and joined < _MAX_WRAPPED and i < len(segments):
            nxt = segments[i][1]
            if _OPEN.search(nxt) and not nxt.lstrip().startswith("'"):
                break                                  # a new dict starts: this one was cut off
            body += (" " if body.rstrip().endswith(",") else "") + nxt
            i += 1
            joined += 1
        out.append((line, prefix, body[: body.index("}") + 1] if "}" in body else body))
    return out


def _value(raw: str) -> tuple[float | None, bool]:
    """A printed value as a number (None when it is not one) and whether it was quoted (5.x style)."""
    text = raw.strip()
    quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "'\""
    if quoted:
        text = text[1:-1].strip()
    wrapped = _WRAPPER.match(text)
    if wrapped:
        text = wrapped.group(1)
    return _common.number(text), quoted


def _record(line: int, prefix: str, body: str) -> _Record | None:
    if not body.endswith("}"):
        return None
    values: dict[str, float] = {}
    raw_epoch, quoted_any = None, False
    for key, raw in _PAIR.findall(body):
        value, quoted = _value(raw)
        if value is None:
            continue
        quoted_any |= quoted
        values[key] = value
        if key == "epoch":
            raw_epoch = raw.strip().strip("'\"")
    if not _is_trainer_log(values):
        return None
    printed = next((int(values.pop(k)) for k in _STEP_KEYS
                    if k in values and math.isfinite(values[k]) and values[k] == int(values[k])), None)
    if printed is None and prefix:
        printed = loop.step_counter(_console.strip_prefix(prefix))
    return _Record(line, values, raw_epoch, quoted_any, printed)


def _is_trainer_log(values: dict[str, float]) -> bool:
    """Trainer.log adds the epoch to every record; a dict without it, a loss or an eval key is some other
    dict the script printed (generation parameters, a config)."""
    return bool({"epoch", "loss", "train_runtime"} & values.keys()) or any(
        k.startswith(_EVAL_PREFIXES) for k in values)


def sniff(text: str) -> bool:
    """A Trainer log dict with a loss or an eval key, possibly wrapped over lines."""
    if "{'" not in text:
        return False
    for _, _, body in _dict_texts(_console.segments(text)):
        if "'loss'" in body or "'eval_" in body:
            return True
    return False


def _int(pattern: re.Pattern, text: str) -> int | None:
    """The count a banner line prints; None when absent or not a plausible count (a 400-digit number)."""
    match = pattern.search(text)
    value = int(match.group(1).replace(",", "")[:20]) if match else None
    return value if value is not None and 0 < value < 2 ** 53 else None


def _banner(text: str) -> dict:
    """What the Trainer banner and the arguments dump say about the step axis."""
    epochs, total, per_epoch = _int(_EPOCHS, text), _int(_TOTAL, text), _int(_PER_EPOCH, text)
    if per_epoch is None and epochs and total:
        per_epoch = total // epochs if total % epochs == 0 else total / epochs
    logging = _LOGGING_STEPS.search(text)
    every = float(logging.group(1)) if logging else None
    if every is not None and not 0 < every < 2 ** 53:
        every = None                               # 1e999, 0: not a logging interval
    if every is not None and 0 < every < 1:        # a ratio of the total, as TrainingArguments allows
        every = math.ceil(every * total) if total else None
    first = _FIRST_STEP.search(text)
    return {"steps_per_epoch": per_epoch or None, "logging_steps": int(every) if every and every >= 1 else None,
            "eval_steps": _int(_EVAL_STEPS, text), "total_steps": total,
            "logging_first_step": bool(first and (first.group(1) or "true").lower() == "true")}


def _epoch_uncertainty(raw: str | None, quoted: bool) -> float:
    """Half a unit of the last printed digit of the epoch: 4.x rounds it to 2 decimals, 5.x prints 4
    significant digits (and drops trailing zeros, so '2' is 2.000)."""
    if not quoted:
        return 0.005
    value = _common.number(raw or "")
    if not value or not math.isfinite(value):
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - 3)


def _epoch_step(rec: _Record, per_epoch: float, every: int | None) -> int:
    """Step from the epoch; when the printed epoch cannot tell neighbouring steps apart, the nearest
    multiple of `every` (logging_steps for training lines, eval_steps for evals) within the rounding."""
    raw = rec.values["epoch"] * per_epoch
    if not math.isfinite(raw) or abs(raw) >= 2 ** 63:
        return raw                  # an epoch of inf: Points leaves the record out, with a note
    spread = _epoch_uncertainty(rec.raw_epoch, rec.quoted) * per_epoch
    if spread >= 0.5 and every:
        snapped = round(raw / every) * every
        if abs(snapped - raw) <= spread + 1:
            return int(snapped)
    return int(round(raw))


def _choose_axis(train: list[_Record], banner: dict) -> str:
    if train and all(r.printed_step is not None for r in train):
        return "printed"
    if banner["steps_per_epoch"] and train and all("epoch" in r.values for r in train):
        return "epoch"
    if banner["logging_steps"]:
        return "logging_steps"
    return "counted"


def _assign_steps(records: list[_Record], axis: str, banner: dict) -> list[int | None]:
    """One step per record (None for the summary): training records by the axis, evals by their own
    printed step or epoch where that is exact, else the step of the training record before them."""
    steps: list[int | None] = []
    last_train, count = 0, 0
    every, first = banner["logging_steps"], banner["logging_first_step"]
    for rec in records:
        if rec.kind == "summary":
            steps.append(None)
            continue
        if rec.kind == "train":
            count += 1
            if axis == "printed":
                step = rec.printed_step
            elif axis == "epoch":
                step = _epoch_step(rec, banner["steps_per_epoch"], every)
            elif axis == "logging_steps":
                step = 1 if first and count == 1 else (count - 1 if first else count) * every
            else:
                step = count
            last_train = step
        elif rec.printed_step is not None:
            step = rec.printed_step
        elif axis == "epoch" and "epoch" in rec.values:
            step = _epoch_step(rec, banner["steps_per_epoch"], banner["eval_steps"])
        else:
            step = last_train
        steps.append(step)
    return steps


def _axis_note(name: str, axis: str, banner: dict) -> str:
    if axis == "printed":
        why = "the step printed with each record"
    elif axis == "epoch":
        why = (f"epoch x {banner['steps_per_epoch']:g} steps per epoch from the Trainer banner"
               + (f", snapped to logging_steps={banner['logging_steps']}" if banner["logging_steps"] else ""))
    elif axis == "logging_steps":
        why = (f"record number x logging_steps={banner['logging_steps']} (no Trainer banner; a record "
               "logged off that grid would get a wrong step)")
    else:
        why = ("record number (no step, no Trainer banner and no logging_steps printed): these steps "
               "count log records, not optimizer steps")
    tail = "; an eval record takes the step of the record before it" if axis in ("logging_steps", "counted") else ""
    return f"{name}: step axis '{axis}': step = {why}{tail}"


def read(path: str, text: str) -> Run:
    segments = _console.segments(text)
    records, unreadable = [], []
    for line, prefix, body in _dict_texts(segments):
        try:
            rec = _record(line, prefix, body)
        except (ValueError, OverflowError, IndexError):
            rec = None
        if rec is None:
            if "'loss'" in body or "'eval_" in body or "'epoch'" in body:
                unreadable.append(line)
            continue
        records.append(rec)
    if not records:
        cut = f"; {len(unreadable)} record(s) cut off or unreadable (line {unreadable[0]})" if unreadable else ""
        raise InputError(path, f"no complete Trainer log record found (read as {FORMAT}){cut}")
    banner = _banner(text)
    train = [r for r in records if r.kind == "train"]
    axis = _choose_axis(train, banner)
    points, filtered, summary = Points(skip_repeats=True), [], {}   # eval dicts repeat the epoch
    for rec, step in zip(records, _assign_steps(records, axis, banner)):
        if step is None:
            summary = dict(rec.values)
            continue
        values = dict(rec.values)
        if rec.kind == "eval" and rec.printed_step is None and axis != "epoch":
            values.pop("epoch", None)       # it took the training record's step; that record's epoch stands
        if values.get("loss") == 0.0 and not math.isfinite(values.get("grad_norm", 0.0)):
            values["loss"] = math.nan
            filtered.append(step)
        for key, value in values.items():
            points.add(step, key, value)
    axis_note = _axis_note(os.path.basename(path), axis, banner)
    notes = _notes(path, text, records, unreadable, axis_note, filtered)
    # the axis note is kept in meta too: assembly drops it when it moves the steps onto another file's
    meta = {"step_axis": axis, "step_axis_note": axis_note,
            **{k: v for k, v in banner.items() if v and k != "logging_first_step"}}
    if summary:
        meta["summary"] = summary
    return points.to_run(path, framework="HF Trainer", fmt=FORMAT, notes=notes, meta=meta)


def _notes(path: str, text: str, records: list[_Record], unreadable: list[int], axis_note: str,
           filtered: list[int]) -> list[str]:
    name = os.path.basename(path)
    evals = sum(r.kind == "eval" for r in records)
    train = sum(r.kind == "train" for r in records)
    style = " (transformers >= 5: quoted values)" if any(r.quoted for r in records) else ""
    notes = [f"{name}: read {train} training and {evals} eval record(s) as {FORMAT}{style}; skipped "
             f"{max(_console.physical_lines(text) - len(records), 0)} other line(s)"]
    if unreadable:
        notes.append(f"{name}: {len(unreadable)} record(s) could not be read and were skipped "
                     f"(line {', '.join(map(str, unreadable[:5]))}); a dict cut off by the end of the file "
                     "or a paste is the usual cause")
    notes.append(axis_note)
    if filtered:
        notes.append(f"{name}: loss 0.0 beside a non-finite grad_norm at step(s) "
                     f"{', '.join(map(str, filtered[:5]))}: HF logging_nan_inf_filter hides a NaN loss "
                     "this way; recorded as NaN")
    return notes
