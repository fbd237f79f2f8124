"""The exceptions stabdiag raises; the CLI turns each into one `error:` line and exit code 2.

    StabdiagError
     ├── InputError          a log file or directory that cannot be read as a run (path, line/key)
     ├── RuleError           a rule file that does not validate (path, line, rule_id)
     ├── ConfigError         a bad option or configuration value (key)
     └── MissingExtraError   an optional dependency is not installed (names the pip extra)
"""

from __future__ import annotations

import os


class StabdiagError(Exception):
    """Base of every error stabdiag raises on purpose."""


class InputError(StabdiagError):
    """A source could not be read as a run."""

    def __init__(self, path: str | os.PathLike[str] | None, problem: str, *, line: int | None = None,
                 key: str | None = None) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        self.line = line
        self.key = key
        where = self.path or "<input>"
        if line is not None:
            where += f":{line}"
        if key is not None:
            where += f" [{key}]"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):      # pickled as built, so that an error met in a `check --jobs` worker reads the same
        return (_input_error, (self.path, self.problem, self.line, self.key))


class RuleError(StabdiagError):
    """A rule file is malformed; the message names file, line and rule id."""

    def __init__(self, path: str | os.PathLike[str], problem: str, *, line: int | None = None,
                 rule_id: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.rule_id = rule_id
        where = self.path + (f":{line}" if line is not None else "")
        who = f"rule {rule_id}: " if rule_id else ""
        self.problem = problem
        super().__init__(f"{where}: {who}{problem}")

    def __reduce__(self):
        return (_rule_error, (self.path, self.problem, self.line, self.rule_id))


class ConfigError(StabdiagError):
    """An option or configuration value is wrong; the message names the option or key."""


class MissingExtraError(StabdiagError):
    """An optional dependency is missing; the message says which pip extra installs it."""

    def __init__(self, what: str, extra: str) -> None:
        self.what, self.extra = what, extra
        super().__init__(f"{what}; install it with: pip install 'stabdiag[{extra}]'")

    def __reduce__(self):
        return (MissingExtraError, (self.what, self.extra))


def _input_error(path, problem, line, key) -> InputError:
    return InputError(path, problem, line=line, key=key)


def _rule_error(path, problem, line, rule_id) -> RuleError:
    return RuleError(path, problem, line=line, rule_id=rule_id)
