"""What typer needs to start fast and read well, in one place: options coerced only where needed, a word
for what each option takes in the help (PATH, RULE, N) instead of a Python type, and the command and group
classes that apply both.  Every command of the CLI is built with `Command`, every group with `Group`."""

# No `from __future__ import annotations`: typer reads every command's annotations at each start, and as
# objects they cost half of what evaluating their strings does (~10 ms of a cold check).
from typer.core import TyperCommand, TyperGroup

HELP = {"help_option_names": ["-h", "--help"]}     # the context settings of every command and group


class _LazyCoercion:
    """A parameter's value coerced only where it needs it.  typer >= 0.2x coerces every value through a
    pydantic TypeAdapter: importing pydantic and building one adapter per option costs more CPU than
    checking a small run.  An option left out and a text value for a text option need nothing; any
    other value (--gpus 8) goes through typer's own coercion, built on first use."""

    __slots__ = ("descriptor", "typed")

    def __init__(self, descriptor) -> None:
        self.descriptor, self.typed = descriptor, None

    def coerce(self, value, param, ctx):
        annotation = self.descriptor.annotation
        if value is None:                 # as typer's RuntimeParam.coerce: nothing given
            return () if param.multiple or param.nargs == -1 else None
        if (annotation is str and isinstance(value, str)) or (annotation is bool and isinstance(value, bool)):
            return value          # a flag's False (typer's --install-completion / --show-completion) too
        if annotation == list[str] and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        if self.typed is None:
            from typer._coercion import build_runtime_param

            self.typed = build_runtime_param(self.descriptor)
        return self.typed.coerce(value, param=param, ctx=ctx)


def _defer_coercion(params) -> None:
    for param in params:     # typer before 0.2x has neither attribute: click types, nothing to defer
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = _LazyCoercion(param.type_descriptor)
        _readable_metavar(param)


# What the help shows after an option, instead of the Python type typer would show (`<list[str]>`).
_METAVARS = {"paths": "PATH", "format": "FORMAT", "output": "FILE", "fail_on": "warn|fail", "mapping": "SIGNAL=KEY",
             "select": "RULE", "ignore": "RULE", "params": "RULE.NAME=VALUE", "with_files": "FILE",
             "rules_dir": "DIR", "baseline": "RUN", "config": "FILE", "step_col": "NAME", "gpus": "N",
             "gpu_hour_cost": "PRICE", "jobs": "N", "color": "auto|always|never", "rule_id": "RULE", "name": "NAME",
             "since": "AGE", "tags": "TAG", "state": "STATE", "which": "REPORT", "interval": "SECONDS",
             "exit_on": "warn|fail", "on_alert": "COMMAND", "clear_after": "N", "inputs": "FILE",
             "out": "FILE", "tokens_out": "FILE", "series_out": "FILE", "sidecar": "FILE", "set_": "NAME=VALUE",
             "format_": "text|json"}


def _readable_metavar(param) -> None:
    """A flag shows no type at all; any other parameter a word for what it takes (PATH, RULE, N, FILE)."""
    if not hasattr(param, "display_type_rich"):
        return
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        param.display_type_rich = lambda ctx: None
        return
    if param.metavar is None:
        param.metavar = _METAVARS.get(param.name or "", (param.name or "value").upper())
    if param.param_type_name == "argument":     # its name says what it takes: no type column beside it
        param.display_type_rich = lambda ctx: None


class _DeferredCoercion:
    """Mixed into typer's command and group classes: their options (--help included) coerce lazily."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _defer_coercion(self.params)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        _defer_coercion([option] if option is not None else [])
        return option

    def parse_args(self, ctx, args):
        # typer adds --install-completion / --show-completion after the group is built
        _defer_coercion(self.params)
        return super().parse_args(ctx, args)


class Command(_DeferredCoercion, TyperCommand):
    pass


class Group(_DeferredCoercion, TyperGroup):
    pass


def readable(group_cls):
    """`group_cls` (a TyperGroup another package defines, e.g. the probe's) with the options of this
    package's commands: coerced lazily, a word for what each takes in the help."""
    return type(f"Readable{group_cls.__name__}", (_DeferredCoercion, group_cls), {})
