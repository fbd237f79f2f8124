"""What a terminal leaves in a captured console log, undone before any format reads it.

A `tee`'d or pasted console is not a sequence of clean lines:

- tqdm redraws its bar with `\\r`, so one physical line holds many bar states and, after the last one,
  whatever was printed next (`  5%|▌   | 1/20 [00:01<00:19, ...]\\r   \\r{'loss': ...}`); a paste that
  lost the `\\r` glues them (`...1.29it/s]{'loss': ...}`) and a paste of a raw capture shows `^M`;
- nested bars move the cursor with ANSI escapes (`\\x1b[A`), colour loggers add colour codes;
- loggers prefix every line with a timestamp, a level and a source (`[2025-09-15 14:48:06,446] [INFO]
  [logging.py:107:log_dist] [Rank 0]`, `INFO 09-15 14:42:21 [executor_base.py:188]`), and a quote in an
  issue thread adds `> `.

`segments` gives the text between those redraws with the bars cut out, each with its line number, so the
numbers of a progress bar (`1/20`, `10.95it/s`, `00:03`) are never read as a step or a metric.
`strip_prefix` removes the logger's prefix, so a date, a time, a pid or a rank is never a metric either.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
# a tqdm bar: optional description, percentage, bar, n/total, and the bracketed timing block (which
# a paste or a narrow terminal may have cut)
_BAR = re.compile(r"(?:[^\s|{}]{0,60}?:\s*)?\d{1,3}%\|[^|]{0,200}\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]?"
                  r"(?:\s*\[[^\]]{0,200}(?:\]|$))?")
_PREFIXES = [re.compile(p) for p in (
    r"^>\s?",                                                                  # quoted in an issue
    r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[\w.]+:\d+\]",                     # absl / glog
    r"^\[?\d{4}[-/]\d{2}[-/]\d{2}[ T_]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[,:]?",
    r"^\[?\d{1,2}/\d{1,2}/\d{2,4}[ ,]+\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?\]?",   # 03/22/2024 09:51:20
    r"^\[?\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?",                       # vLLM: 09-15 14:42:21
    r"^\[?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]?",                                 # [05:19:47.352788]
    r"^[-|:]?\s*\[?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|TRACE|NOTICE)\]?\s*[-|:]?",
    r"^[\w.<>]+ - (?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL) - ",             # logging's default format
    r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\)",                                       # Ray workers
    r"^\[(?:[^\]\[]*\.py:[^\]]*|[Rr]ank ?\d+[^\]]*|default\d+|rank\d+|GPU ?\d+|node\d*|worker\d*)\]:?",
    r"^\w+:\d+(?=\s+\[)",                                                      # wandb: MainThread:6970
)]


def _cut_bars(segment: str) -> str:
    """The segment without tqdm bars; what was printed after a bar on the same line is kept."""
    if "%|" not in segment:
        return segment
    return _BAR.sub(" ", segment)


def _plain(text: str) -> bool:
    """Nothing to undo (most logs written to a file): each line is one piece once stripped."""
    return "\r" not in text and "%|" not in text and "\x1b" not in text and "^M" not in text


def segment_lines(text: str) -> tuple[str, list[int] | None]:
    """The segments as the lines of one text, for a reader that takes all lines at once, and each one's
    line number; for a plain text the text itself and None: its lines are its segments once stripped,
    blank ones left out."""
    if _plain(text):
        return text, None
    pieces = _undone(text)
    return "\n".join(piece for _, piece in pieces), [number for number, _ in pieces]


def segments(text: str) -> list[tuple[int, str]]:
    """(line number, text) for every piece of the console between newlines and carriage returns, with
    ANSI escapes and progress bars removed and surrounding blanks stripped; empty pieces are dropped."""
    if _plain(text):
        # nothing to undo (most logs written to a file): each line is one piece, found at C speed
        stripped = [(number, line.strip()) for number, line in enumerate(text.split("\n"), start=1)]
        return [item for item in stripped if item[1]]
    return _undone(text)


def _undone(text: str) -> list[tuple[int, str]]:
    """segments() of a text that is not _plain: escapes, carriage returns and bars undone line by line."""
    out: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if "\x1b" in line:
            line = ANSI.sub("", line)
        if "^M" in line:
            line = line.replace("^M", "\r")
        for piece in line.split("\r"):
            piece = _cut_bars(piece).strip()
            if piece:
                out.append((number, piece))
    return out


def strip_prefix(line: str) -> str:
    """The line without its logger prefix (timestamps, levels, source locations, ranks, pids)."""
    previous = None
    line = line.strip()
    while previous != line:
        previous = line
        for pattern in _PREFIXES:
            line = pattern.sub("", line, count=1).strip()
    return line


def physical_lines(text: str) -> int:
    """Number of non-blank lines, for the 'skipped N other lines' part of a note."""
    return sum(1 for line in text.split("\n") if line.strip())
