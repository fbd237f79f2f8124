"""How a console log ended and how long it was planned to run, read from its text: the ending its tail
shows (a traceback, a cause, the trainer's summary: see stabdiag/ending.py for the kinds) and the total
its progress bars and step counters show.  Apart from ending.py so that a run with no console (a CSV, a
W&B run) does not build these patterns at every start.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain

from . import Ending, Planned
from .completion import IGNORED_AT_EXIT, NOISE_LITERALS, completion, is_exit_noise, may_hold, says_summary

_TAIL_LINES = 400
_NONFINITE = re.compile(r"probability tensor contains either .?inf.?, .?nan.? or element < 0|loss is nan|"
                        r"found (?:nan|inf)|nan or inf|non-?finite (?:loss|values?|gradients?)|"
                        r"FloatingPointError|nan detected|inf detected", re.IGNORECASE)
_OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE)
_COLLECTIVE = re.compile(r"NCCL|collective operation timeout|Watchdog caught|DistBackendError|"
                         r"ProcessGroup\w* (?:timeout|error)|connection (?:reset|closed) by peer|"
                         r"ChildFailedError|worker .* (?:lost|died)", re.IGNORECASE)
_HARDWARE = re.compile(r"ECC error|ECCUncorrectable|\bXid\b|fallen off the bus|NVLink error|"
                       r"hardware error", re.IGNORECASE)
_KILLED = re.compile(r"^Killed$|SIGKILL|SIGTERM|signal 9\b|signal 15\b|exitcode\s*:\s*-9|"
                     r"DUE TO TIME LIMIT|received signal", re.IGNORECASE)
_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt|Exit)\b)(?::\s*(.*))?$")
_FINISHED = re.compile(r"'train_runtime'|\"train_runtime\"|Training completed|training finished|"
                       r"Final validation metrics", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CAUSES = (("hardware", _HARDWARE), ("oom", _OOM), ("collective", _COLLECTIVE), ("killed", _KILLED))
# a metric record, each alternative behind its literal (`step(?<!\wstep)` is `\bstep`), so that each can be
# searched for alone at C speed: Python's regex engine tries an alternation at every position
_METRIC_RECORD_PARTS = (r"\{'(?:loss|train_loss|reward|eval_\w+)'", r"step(?<!\wstep)[:= ]\s*\d+\s*[-|,]",
                        r"iteration\s+\d+\s*/")
_METRIC_RECORD = re.compile("|".join(_METRIC_RECORD_PARTS))
_TRACEBACK = "Traceback (most recent call last)"
# For each IGNORECASE pattern the literals, case-folded (see _folded_bytes), of which a line it matches holds
# one: a tail that holds none of them is not searched, and only the lines that hold one are.  An IGNORECASE
# pattern tried at every position of a 400-line tail costs more than reading the whole log.
_LITERALS = {
    _OOM: (b"out of memory", b"outofmemoryerror", b"cublas_status_alloc_failed"),
    _COLLECTIVE: (b"nccl", b"collective operation timeout", b"watchdog caught", b"distbackenderror", b"processgroup",
                  b"connection reset by peer", b"connection closed by peer", b"childfailederror", b"worker "),
    _HARDWARE: (b"ecc error", b"eccuncorrectable", b"xid", b"fallen off the bus", b"nvlink error",
                b"hardware error"),
    _KILLED: (b"killed", b"sigkill", b"sigterm", b"signal", b"exitcode", b"due to time limit"),
    _FINISHED: (b"train_runtime", b"training completed", b"training finished", b"final validation metrics"),
}
_LITERAL_PARTS = {_METRIC_RECORD: tuple(re.compile(part) for part in _METRIC_RECORD_PARTS)}
# the non-ASCII letters that IGNORECASE matches to an ASCII letter (re folds İ and ı to i, ſ to s, the Kelvin
# sign to k; no other code point does), written as that letter before lowering
_FOLDED_LETTERS = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))
_FOLDED_LETTER_BYTES = tuple((letter.encode(), ascii_letter.encode()) for letter, ascii_letter in _FOLDED_LETTERS)


def _with_ascii_letters(text: str) -> str:
    if not text.isascii():
        for letter, ascii_letter in _FOLDED_LETTERS:
            if letter in text:
                text = text.replace(letter, ascii_letter)
    return text


def _folded(text: str) -> str:
    """`text` lowered so that a match of an IGNORECASE pattern's ASCII literal in `text` is one of the literal
    in the result, at the same position: one character for one (İ, whose lowercase is two characters, is
    written as i first), each character in or out of \\w, \\s and \\d as it was."""
    return _with_ascii_letters(text).lower()


def _folded_bytes(text: str) -> bytes:
    """_folded(text) as UTF-8 with only its ASCII letters lowered: the same lines and the same ASCII
    literals, three times faster to make than _folded of a text that is not ASCII (UTF-8 never holds an
    ASCII byte inside a character, and a letter's encoding is found only where that letter is)."""
    if text.isascii():
        return text.encode("ascii").lower()
    data = text.encode("utf-8", "surrogatepass")
    for letter, ascii_letter in _FOLDED_LETTER_BYTES:
        if letter in data:
            data = data.replace(letter, ascii_letter)
    return data.lower()


@dataclass(frozen=True, slots=True)
class _Lines:
    """A console tail's lines (ANSI codes removed, right-stripped), with their joined and case-folded text
    made once for the quick tests of _last_index."""

    lines: list[str]
    joined: str
    folded: bytes

    @classmethod
    def of(cls, lines: list[str]) -> "_Lines":
        joined = "\n".join(lines)
        return cls(lines, joined, _folded_bytes(joined))

    def since(self, start: int) -> "_Lines":
        return self if start <= 0 else _Lines.of(self.lines[start:])


def _tail_of(text: str) -> _Lines:
    return _Lines.of([(_ANSI.sub("", line) if "\x1b" in line else line).rstrip()
                      for line in _last_lines(text, _TAIL_LINES)])


def ending_of_console(text: str, source: str) -> Ending | None:
    """The ending a console log's tail shows, or None when it shows none.  A traceback that metric
    records follow was survived (a caught error, a retried step), so it is not the ending; the lines every
    exit prints (stabdiag.read.ending.completion) are never a death, and a death after the evidence that
    training completed is shutdown noise."""
    lines = _tail_of(text)
    # what comes after the last metric record: anything before it, the run went past
    tail = lines.since(_last_index(lines, _METRIC_RECORD, -1) + 1)
    quiet, noise = _without_exit_noise(tail)
    death = _death(quiet, source)
    done = completion(tail.lines, tail.folded)
    if done is None and _last_index(lines, _FINISHED) is not None:   # the summary is itself a record
        done = completion(lines.lines, lines.folded)
        done = (-1, done[1]) if done is not None else None
    if death is not None and done is not None and done[0] < death[0]:
        return Ending("finished", f"{_evidence(done[1])}; then {death[1].message} (shutdown noise after the "
                                  "training completed, not a death)", source)
    if death is not None:
        return death[1]
    if done is not None:
        after = f"; the exit-time warning after it is not a death ({noise[:80]})" if noise else ""
        return Ending("finished", _evidence(done[1]) + after, source)
    return None


def _evidence(words: list[str]) -> str:
    return "the trainer printed its final summary" if says_summary(words) else "; ".join(words)


def _without_exit_noise(tail: _Lines) -> tuple[_Lines, str | None]:
    """The tail with every exit-time line blanked (same indexes), and the first such line that named a
    failure (NCCL), for the ending's message: those lines are never the death."""
    if not may_hold(tail.folded, NOISE_LITERALS):      # most tails: nothing to blank
        return tail, None
    kept, first, ignored = [], None, False
    for line in tail.lines:
        if line.startswith(IGNORED_AT_EXIT):         # a destructor's traceback at interpreter exit
            ignored = True
        if ignored or is_exit_noise(line):
            if first is None and not ignored and _COLLECTIVE.search(line):
                first = line.strip()
            if ignored and _ERROR_LINE.match(line.strip()) and not line.startswith(IGNORED_AT_EXIT):
                ignored = False                      # the traceback's error line ends it
            kept.append("")
            continue
        kept.append(line)
    if kept == tail.lines:
        return tail, None
    return _Lines.of(kept), first


def _last_index(lines: _Lines, pattern: re.Pattern, default: int | None = None) -> int | None:
    """The index of the last line `pattern` matches, or `default`.  Only lines that can match are searched:
    those holding one of the pattern's literals (_LITERALS), or all of them once one of its literal-first
    parts (_LITERAL_PARTS) is found in the joined text; most tails hold no such line."""
    literals = _LITERALS.get(pattern)
    if literals is not None:
        if not any(literal in lines.folded for literal in literals):
            return default
        folded = lines.folded.split(b"\n")           # one line for one: folding keeps every \n and adds none
        candidates = (i for i in range(len(lines.lines) - 1, -1, -1)
                      if any(literal in folded[i] for literal in literals))
    else:
        parts = _LITERAL_PARTS.get(pattern)
        if not lines.lines or (parts is not None and not any(part.search(lines.joined) for part in parts)):
            return default
        candidates = range(len(lines.lines) - 1, -1, -1)
    return next((i for i in candidates if pattern.search(lines.lines[i])), default)


def _last_lines(text: str, count: int) -> list[str]:
    """text.splitlines()[-count:], splitting only a tail of the text that holds more than `count` lines
    (its cut first line is dropped): a long console is not split whole to read its last lines."""
    size = 64 << 10
    while size < len(text):
        lines = text[-size:].splitlines()
        if len(lines) > count:
            return lines[-count:]
        # long lines: enough for `count` of them at the length seen so far, with a margin, else 4 times
        size = max(size * (count + 1) // max(len(lines) - 1, 1) * 5 // 4, size + 1) if len(lines) > 8 else size * 4
    return text.splitlines()[-count:]


def _death(tail: _Lines, source: str) -> tuple[int, Ending] | None:
    """(where in the tail, the death) of the last traceback, else of the last line naming a cause."""
    trace = None
    if _TRACEBACK in tail.joined:
        trace = max((i for i, line in enumerate(tail.lines) if line.startswith(_TRACEBACK)), default=None)
    if trace is not None:
        error = next((m for line in tail.lines[trace + 1:] if (m := _ERROR_LINE.match(line.strip()))), None)
        message = (f"{error.group(1)}: {error.group(2) or ''}".rstrip(": ") if error
                   else "a Python traceback with no error line")
        return trace, Ending(_classify(message, tail.lines[trace:]), message, source)
    for kind, pattern in _CAUSES:
        hit = _last_index(tail, pattern)
        if hit is not None:
            return hit, Ending(kind, tail.lines[hit].strip()[:200], source)
    return None


def died_before_first_step(text: str) -> str | None:
    """For a console log no reader took (no metric line at all): the death it shows, as the reason it
    holds no metrics ("died before its first logged step: RuntimeError: ..."), or None."""
    lines = _tail_of(text)
    if _last_index(lines, _METRIC_RECORD) is not None:
        return None
    found = _death(_without_exit_noise(lines)[0], "")
    if found is None:
        return None
    return f"died before its first logged step: {found[1].message}"


def _classify(message: str, block: list[str]) -> str:
    text = "\n".join([message, *block[-20:]])
    for kind, pattern in (("nonfinite", _NONFINITE), *_CAUSES):
        if pattern.search(message) or (kind != "nonfinite" and pattern.search(text)):
            return kind
    return "exception"


# --- the planned length a console shows -------------------------------------------------------------------

# a tqdm bar: its description (if any), n and total; a training bar is named for training or not at all
_BAR_COUNTS = re.compile(r"\s*(\d+)/(\d+)\b")      # after a bar's closing `|`: n/total
_TRAINING_BAR = re.compile(r"train|progress|step|iter|epoch|optimi", re.IGNORECASE)
_OTHER_BAR = re.compile(r"eval|valid|test|map|load|filter|download|token|generat|shard|example|sampl|"
                        r"batch(?:es)? of|upload|sav|merg|prepar|process", re.IGNORECASE)
_EPOCH_COUNTER = re.compile(r"\bepoch[:\s]\s*\d+\s*/\s*\d+", re.IGNORECASE)
# a step counter's total: `iteration 100/ 1000` (Megatron), `step:500/1750` (modded-nanogpt), `Step 12/500`
# (hand-written loops), with the word (step, Step, STEP, iter, Iter, ITER, iteration, Iteration, ITERATION)
# not after a letter.  Four patterns, each a literal first, found at C speed where an alternation of the
# words is tried at every position: the lowercase words behind their four letters (`step(?<![A-Za-z]step)`
# is `(?<![A-Za-z])step`), the capitalised ones behind their rarer capital
_COUNTER_TOTAL = r"[:\s]\s*\d+\s*/\s*(\d+)\b"
_COUNTER_SPELLINGS = (re.compile(r"step(?<![A-Za-z]step)" + _COUNTER_TOTAL),
                      re.compile(r"S(?<![A-Za-z]S)(?:tep|TEP)" + _COUNTER_TOTAL),
                      re.compile(r"iter(?<![A-Za-z]iter)(?:ation)?" + _COUNTER_TOTAL),
                      re.compile(r"I(?<![A-Za-z]I)(?:ter(?:ation)?|TER(?:ATION)?)" + _COUNTER_TOTAL))
_COUNTER_WORDS = ((b"step", _COUNTER_SPELLINGS[:2]), (b"iter", _COUNTER_SPELLINGS[2:]))   # each word, lowered
_EPOCH_CANDIDATE = re.compile(r"epoch[:\s]\s*\d+\s*/\s*\d+")   # _EPOCH_COUNTER, literal first, for folded text
# and for _folded_bytes: any byte of a non-ASCII character may be one of a Unicode space or digit there
_EPOCH_CANDIDATE_BYTES = re.compile(rb"epoch[:\s\x1c-\x1f\x80-\xff][\s\x1c-\x1f\x80-\xff]*[\d\x80-\xff]+"
                                    rb"[\s\x1c-\x1f\x80-\xff]*/[\s\x1c-\x1f\x80-\xff]*[\d\x80-\xff]")
_PER_EPOCH = -1
_PLAN_BYTES = 128 << 10          # of the head and of the tail of a long console, for its planned length


def _bars(text: str):
    """(description, n, total) of every progress bar, found from the `%|` each one holds and read
    outward from there (a pattern tried at every position of a long log costs too much)."""
    pos = text.find("%|")
    while pos != -1:
        close = text.find("|", pos + 2, pos + 300)
        counts = _BAR_COUNTS.match(text, close + 1) if close != -1 else None
        if counts is not None:
            low = max(0, pos - 90)                  # bounded: a log without \r must not be searched to its start
            start = max(text.rfind("\n", low, pos), text.rfind("\r", low, pos), low - 1) + 1
            left = text[start:pos].rstrip("0123456789").rstrip()
            desc = left[:-1].replace("\x1b", "").strip() if left.endswith(":") else ""
            yield desc, int(counts.group(1)), int(counts.group(2))
        pos = text.find("%|", pos + 2)


def planned_of_console(text: str) -> Planned | None:
    """The planned length a console shows: a `step N/M` counter's total (not a per-epoch one), else the
    total of the training progress bar (named for training, else the first unnamed bar).  Only the
    head and the tail of a long log are read: every bar and counter line repeats the total."""
    if len(text) > 2 * _PLAN_BYTES:
        text = text[:_PLAN_BYTES] + "\n" + text[-_PLAN_BYTES:]
    total = _counter_total(text)
    if total is not None:
        return None if total == _PER_EPOCH else Planned(total, "the step counter's total")
    named: dict[int, int] = {}
    first_unnamed = None
    for desc, _, total in _bars(text):
        if total <= 1 or (desc and (_OTHER_BAR.search(desc) or not _TRAINING_BAR.search(desc))):
            continue
        if desc:
            named[total] = named.get(total, 0) + 1
        elif first_unnamed is None:       # the HF Trainer draws its training bar before any eval bar
            first_unnamed = total
    if named:
        return Planned(max(named, key=named.__getitem__), "the training progress bar's total")
    if first_unnamed is not None:
        return Planned(first_unnamed, "the progress bar's total")
    return None


def _counter_total(text: str) -> int | None:
    """The total most `step N/M` counters show (the first shown of those tied), _PER_EPOCH when a
    counter's line holds an `epoch N/M` counter too (its total is not the run's), None for no counter.
    Without an epoch counter the totals are counted from one findall per pattern of the counter
    (_COUNTER_SPELLINGS)."""
    folded = _folded_bytes(text)
    # the spellings of a word the folded text does not hold cannot match (a scan each saved)
    spellings = [s for word, spellings in _COUNTER_WORDS if word in folded for s in spellings]
    if _has_epoch_counter(text, folded):
        return _counter_total_by_lines(text, spellings, per_epoch=True)
    found: Counter[str] = Counter()
    for spelling in spellings:
        found.update(spelling.findall(text))
    totals: dict[int, int] = {}
    for digits, count in found.items():
        if (total := int(digits)) > 1:
            totals[total] = totals.get(total, 0) + count
    if not totals:
        return None
    most = max(totals.values())
    if sum(count == most for count in totals.values()) > 1:
        return _counter_total_by_lines(text, spellings, per_epoch=False)   # a tie: the first shown wins, in order
    return max(totals, key=totals.__getitem__)


def _has_epoch_counter(text: str, folded: bytes) -> bool:
    """_EPOCH_COUNTER.search(text) is not None, searched for from where its literal-first form finds a
    candidate in the case-folded text (folding keeps every position, see _folded); `folded` is
    _folded_bytes(text)."""
    if _EPOCH_CANDIDATE_BYTES.search(folded) is None:     # most logs: found out at C speed
        return False
    first = _EPOCH_CANDIDATE.search(_folded(text))
    return first is not None and _EPOCH_COUNTER.search(text, first.start()) is not None


def _counter_total_by_lines(text: str, spellings: list[re.Pattern], *, per_epoch: bool) -> int | None:
    """_counter_total read counter by counter (of the `spellings` that can match), in the order they were
    printed; `per_epoch`: the text holds an epoch counter (else no counter's line needs the check)."""
    totals: dict[int, int] = {}
    # every counter in order: one holds no letter past its word, so no two patterns' matches overlap
    for match in sorted(chain.from_iterable(s.finditer(text) for s in spellings), key=_start):
        total = int(match.group(1))
        if total > 1:
            totals[total] = totals.get(total, 0) + 1
        if not per_epoch:
            continue
        low, high = max(0, match.start() - 300), min(len(text), match.end() + 300)
        line_start = max(text.rfind("\n", low, match.start()), low - 1) + 1
        line_end = text.find("\n", match.end(), high)
        if _EPOCH_COUNTER.search(text[line_start:line_end if line_end >= 0 else high]):
            return _PER_EPOCH                   # a per-epoch counter: its total is not the run's
    return max(totals, key=totals.__getitem__) if totals else None


def _start(match: re.Match) -> int:
    return match.start()
