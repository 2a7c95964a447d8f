"""One configuration format for every command: a TOML file (`--config FILE`) and the environment.

The file has a table per command, named as on the command line (`[index]`, `[rest]`,
`[tx.decode]`), whose keys are the command's long option names without the dashes
(`start-height = 800000`, `electrum = ["tcp://a:50001"]`, `no-mempool = true`). The environment
sets the same options as `LADLE_<COMMAND>_<OPTION>`, upper case with `_` for spaces and dashes
(`LADLE_INDEX_START_HEIGHT=800000`; a list option takes comma-separated values, a flag one of
1/true/yes/on or 0/false/no/off). Precedence: the command line, then the environment, then the
file, then the built-in defaults — implemented by setting the parser's defaults before it
parses, so every command gets it without knowing. A key or variable that names no option of its
command, or a value the option would refuse, is a usage error.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.usage import UsageError

__all__ = ["CONFIG_OPTION", "add_config_option", "apply_config", "leaf_commands"]

CONFIG_OPTION = "--config"
ENV_PREFIX = "LADLE"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction)
_LISTS = (argparse._AppendAction, argparse._ExtendAction)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command that runs (has no subcommands), by its path of names."""
    subs = _subcommands(parser)
    if not subs:
        return {path: parser}
    leaves: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for name, sub in subs.items():
        leaves |= leaf_commands(sub, (*path, name))
    return leaves


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """Give every command of the tree `--config FILE`."""
    for leaf in leaf_commands(parser).values():
        leaf.add_argument(
            CONFIG_OPTION,
            metavar="FILE",
            help="TOML file with a table per command, keys = long option names "
            "(LADLE_<COMMAND>_<OPTION> variables override it; the command line overrides both)",
        )


def apply_config(
    parser: argparse.ArgumentParser, argv: Sequence[str], environ: Mapping[str, str]
) -> None:
    """Set the defaults of the command `argv` names from its `--config` file's table and the
    environment. UsageError (one line) for an unreadable file or an unknown key or value."""
    path, leaf = _command(parser, argv)
    if leaf is None:
        return  # no command named: argparse says so
    options = _options(leaf)
    file = _config_file(argv[len(path) :])
    values: dict[str, tuple[argparse.Action, Any]] = {}
    if file is not None:
        tables = _read(file)
        _check_tables(parser, tables, file, ())
        section: Any = tables
        for name in path:
            section = section.get(name, {})
        where = f"{file}: [{'.'.join(path)}]"
        for key, value in section.items():
            action = options.get(key)
            if action is None:
                raise UsageError(f"{where}: unknown option {key!r}")
            values[action.dest] = (action, _from_toml(action, value, f"{where} {key}"))
    prefix = "_".join((ENV_PREFIX, *path)).upper().replace("-", "_") + "_"
    by_variable = {prefix + k.upper().replace("-", "_"): a for k, a in options.items()}
    for variable, text in environ.items():
        if not variable.startswith(prefix):
            continue
        action = by_variable.get(variable)
        if action is None:
            raise UsageError(f"{variable}: no such option of `{' '.join(path)}`")
        values[action.dest] = (action, _from_env(action, text, variable))
    for dest, (action, value) in values.items():
        if isinstance(action, _LISTS):
            _replaced_by_command_line(action)
        action.default = value
        action.required = False  # given: the command line may leave it out
        leaf.set_defaults(**{dest: value})


def _command(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[tuple[str, ...], argparse.ArgumentParser | None]:
    """The path of subcommand names at the start of `argv` and the command they reach."""
    path: list[str] = []
    current = parser
    for token in argv:
        subs = _subcommands(current)
        if not subs:
            return tuple(path), current
        if token not in subs:
            return tuple(path), None
        path.append(token)
        current = subs[token]
    return tuple(path), None if _subcommands(current) else current


def _config_file(arguments: Sequence[str]) -> str | None:
    """The `--config` value among a command's arguments (the last one given)."""
    found: str | None = None
    for i, token in enumerate(arguments):
        if token == "--":
            break
        option, equals, value = token.partition("=")
        # (argparse takes any unambiguous prefix of an option for it)
        if len(option) < 3 or not CONFIG_OPTION.startswith(option):
            continue
        if equals:
            found = value
        elif i + 1 < len(arguments):
            found = arguments[i + 1]
    return found


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The command's configurable options by long name (no help, no `--config`)."""
    options: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        for option in action.option_strings:
            if option.startswith("--") and option != CONFIG_OPTION:
                options[option[2:]] = action
    return options


def _read(file: str) -> dict[str, Any]:
    try:
        with open(file, "rb") as stream:
            return tomllib.load(stream)
    except OSError as exc:
        raise UsageError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file}: not TOML: {exc}") from None


def _check_tables(
    parser: argparse.ArgumentParser, tables: Mapping[str, Any], file: str, path: tuple[str, ...]
) -> None:
    """Every table of the file names a command (its keys are checked when it runs)."""
    subs = _subcommands(parser)
    for name, value in tables.items():
        where = ".".join((*path, name))
        if name not in subs:
            raise UsageError(f"{file}: [{where}] is not a command")
        if not isinstance(value, dict):
            raise UsageError(f"{file}: {where} must be a table of options")
        if _subcommands(subs[name]):
            _check_tables(subs[name], value, file, (*path, name))


def _convert(action: argparse.Action, text: str, where: str) -> Any:
    """`text` as the command line would read it (the option's type and choices)."""
    convert = action.type if callable(action.type) else str
    try:
        value = convert(text)
    except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: invalid value {text!r}: {exc}") from None
    if action.choices is not None and value not in action.choices:
        shown = ", ".join(map(repr, action.choices))
        raise UsageError(f"{where}: invalid choice {text!r} (choose from {shown})")
    return value


def _takes_list(action: argparse.Action) -> bool:
    return isinstance(action, _LISTS) or action.nargs in ("+", "*") or isinstance(action.nargs, int)


def _list_value(action: argparse.Action, texts: Sequence[str], where: str) -> list[Any]:
    items = [_convert(action, t, where) for t in texts]
    if type(action) is argparse._AppendAction and action.nargs in ("+", "*"):
        return [items]  # one occurrence of the option
    return items


def _from_toml(action: argparse.Action, value: Any, where: str) -> Any:
    if isinstance(action, _FLAGS):
        if not isinstance(value, bool):
            raise UsageError(f"{where}: must be true or false, got {value!r}")
        on = isinstance(action, argparse._StoreTrueAction)
        return value if on else not value
    if isinstance(value, bool | dict):
        raise UsageError(f"{where}: must be a value of the option, got {value!r}")
    if _takes_list(action):
        items = value if isinstance(value, list) else [value]
        return _list_value(action, [_text(v, where) for v in items], where)
    if isinstance(value, list):
        raise UsageError(f"{where}: takes one value, got a list")
    return _convert(action, _text(value, where), where)


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool | dict | list):
        raise UsageError(f"{where}: must be a string or a number, got {value!r}")
    return str(value)


def _from_env(action: argparse.Action, text: str, where: str) -> Any:
    if isinstance(action, _FLAGS):
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise UsageError(f"{where}: must be one of 1/true/yes/on or 0/false/no/off")
        on = word in _TRUE
        return on if isinstance(action, argparse._StoreTrueAction) else not on
    if _takes_list(action):
        items = [t.strip() for t in text.split(",") if t.strip()]
        return _list_value(action, items, where)
    return _convert(action, text, where)


class _FreshList:
    """Mixin for list options (`append`, `extend`) whose default came from the configuration:
    the first use on the command line starts a new list instead of adding to the configured
    one (the command line overrides, it does not extend)."""

    dest: str
    default: Any

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is self.default:
            setattr(namespace, self.dest, [])
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


def _replaced_by_command_line(action: argparse.Action) -> None:
    cls = type(action)
    if not issubclass(cls, _FreshList):
        action.__class__ = type(f"Fresh{cls.__name__}", (_FreshList, cls), {})
