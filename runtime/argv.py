"""A command line from parsed options: how a parent hands its own options to a child command
(`ladle up` → `ladle devnet`) without naming each one, so an option added to the child's group
reaches it with no change in the parent."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection


def options_argv(
    add_options: Callable[[argparse.ArgumentParser], None],
    args: argparse.Namespace,
    *,
    skip: Collection[str] = (),
) -> list[str]:
    """The arguments that give the options `add_options` defines their values in `args`;
    options at their default and those whose dest is in `skip` are left out. Values are
    written with `str`, so a `type=` must accept what it produced (numbers, paths, text)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_options(parser)
    out: list[str] = []
    for action in parser._actions:
        if not action.option_strings or action.dest in skip:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:  # store_true / store_false / store_const: the flag says it
            out.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                out += [flag, str(item)]
        elif isinstance(value, list | tuple):
            out += [flag, *(str(item) for item in value)]
        else:
            out += [flag, str(value)]
    return out
