"""How every command ends, in one place: library errors become one `error:` line and exit code 2, a
command's own code leaves through `Exit`, and what is said on stderr (`say`) is escaped.

Exit codes (as pytest's): 0 nothing at or above --fail-on, 1 something is, 2 a usage, input, config or
rule error, 3 a run nothing could be judged on (--allow-unknown: 0).  --debug adds tracebacks, never
changes a code.
"""

import os
import sys
import warnings

import typer

from ..errors import ConfigError, StabdiagError


class Exit(Exception):
    """Raised by a command body to end with `code` once the notes it left are said."""

    def __init__(self, code: int) -> None:
        self.code = code


def choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{flag}: expected one of {', '.join(allowed)}; got {value!r}")
    return value


def say(line: str) -> None:
    """One `error:`/`warning:`/`note:` line on stderr, every value in it escaped (report._escape)."""
    from ..report._escape import stderr

    print(stderr(line), file=sys.stderr)


_NOTES: list[str] = []    # said by `guarded` once the command has run: an error stays one line


def note_after(line: str) -> None:
    """A `note:` to say once the command has run (unless it ends in an error)."""
    _NOTES.append(line)


def _say_notes() -> None:
    for line in _NOTES:
        say(line)
    _NOTES.clear()


def guarded(fn, debug: bool = False) -> None:
    """Run a command body; library errors become one `error:` line and exit code 2.  numpy's warnings
    about arithmetic on Inf and NaN (evidence in a metric, reported as findings) stay off stderr
    unless --debug.  --debug prints the traceback as well, and exits with the same code as without it:
    a CI job rerun with --debug to see why must not turn red or green because of it."""
    try:
        os.getcwd()
    except OSError:
        say("error: the working directory no longer exists (deleted?); cd to one that does and rerun")
        raise typer.Exit(2) from None
    _NOTES.clear()
    try:
        with warnings.catch_warnings():
            if not debug:
                warnings.simplefilter("ignore", RuntimeWarning)
            fn()
        _say_notes()
    except Exit as done:
        _say_notes()
        raise typer.Exit(done.code) from None
    except StabdiagError as exc:
        _traceback(debug)
        say(f"error: {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise typer.Exit(2) from None
    except BrokenPipeError:
        # the reader went away (`stabdiag ... | head`): not an error of ours; keep Python from
        # complaining again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except Exception as exc:  # an internal error still gets one line; --debug shows the traceback
        _traceback(debug)
        say(f"error: internal error: {type(exc).__name__}: {exc}; rerun with --debug and report it")
        raise typer.Exit(2) from None


def _traceback(debug: bool) -> None:
    """With --debug, the traceback of the exception being handled, on stderr, before its `error:` line."""
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)
