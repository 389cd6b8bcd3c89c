"""The command line's arguments, checked before any work: the modules it imports (`--import`,
`--network`'s module), names given empty or as '-', a file written that is one of those read,
`--plot`'s file, and ROWS '-' (standard input)."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from typing import Any

from deepsharp.core.cli_output import CommandError, writable
from deepsharp.core.plotting import image_kind

__all__ = [
    "STDIN",
    "add_imports",
    "at_least_one",
    "check_names",
    "import_modules",
    "imported",
    "not_an_input",
    "plot_target",
    "rows_from_stdin",
    "said_of_stdin",
]

STDIN = "/dev/stdin"
"""What ROWS '-' reads: standard input, through the system's name for it."""


def at_least_one(text: str) -> int:
    """An argparse type: a whole number of 1 or more (argparse says what was wrong, on one
    line). The command line's counts and the benchmark scripts' rounds take it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, not {text!r}")
    return value


def import_modules(arguments: argparse.Namespace) -> None:
    """Import the modules `--import` names, so that a file naming kinds of one's own can be
    read; a file never imports code itself."""
    for name in arguments.imports:
        imported(name, f"--import {name!r}: the module")


def imported(name: str, said: str) -> Any:
    """The module `name`, looked for in the current folder first; a CommandError beginning with
    `said` where it cannot be imported: no module of that name, a name that is no module's
    ('', '.x'), or a module whose own code fails as it is imported (its error named)."""
    if not name or name.startswith(".") or not all(part for part in name.split(".")):
        raise CommandError(f"{said} is no module name: give one such as mymodule or package.mod")
    try:
        here = os.getcwd()
    except FileNotFoundError:
        raise CommandError(
            f"{said} is looked for in the current folder, which no longer exists (it was "
            "removed): run from a folder that does"
        ) from None
    sys.path.insert(0, here)
    try:
        return import_module(name)
    except ImportError as error:
        raise CommandError(f"{said} cannot be imported ({error})") from None
    except SyntaxError as error:
        raise CommandError(
            f"{said} cannot be imported: {error.filename}, line {error.lineno}: {error.msg}"
        ) from None
    except Exception as error:  # the module's own code failed: said, as a factory's failure is
        raise CommandError(f"{said} raised {error!r} as it was imported") from None
    finally:
        sys.path.remove(here)


_FILES_WRITTEN = {"save": "--save", "plot": "--plot", "output": "--output", "out": "--out"}
_GIVEN = {"checkpoints": "--checkpoints", "network": "--network", "pipeline": "--pipeline",
          "target": "--target"}  # fmt: skip


def check_names(arguments: argparse.Namespace) -> None:
    """Refuse a name given as empty text (`--save ""`, from an unset variable): it was taken
    as no file or option at all (nothing saved, the default network) or called a folder. And a
    file to write named '-': `predict --output -` is standard output, as without it; elsewhere
    '-' would be a file of that name (ROWS '-' is standard input)."""
    for attribute, option in {**_FILES_WRITTEN, **_GIVEN}.items():
        given = getattr(arguments, attribute, None)
        if arguments.command == "export" and attribute == "out":
            option = "OUT.onnx"
        if given == "" and attribute in _FILES_WRITTEN:
            optional = "" if attribute == "out" else f" (or leave {option} out)"
            raise CommandError(f"{option} is empty: give a file name{optional}")
        if given == "" and arguments.command == "train" and attribute == "target":
            raise CommandError("--target is empty: give the column to predict")  # (required:
        if given == "":  # "leave --target out" was refused next, trial CL)
            raise CommandError(f"{option} is empty: give its value, or leave {option} out")
        if given == "-" and attribute == "output":
            arguments.output = None  # the predictions on standard output
        elif given == "-" and attribute in _FILES_WRITTEN:
            raise CommandError(
                f"{option} '-': this writes a file, and '-' would be one of that name; give a "
                "file name"
            )


def rows_from_stdin(arguments: argparse.Namespace) -> None:
    """ROWS given as '-' (`cat rows.csv | deepsharp predict model.ds -`): standard input,
    read as any pipe is, once and as it comes, through the system's name for it."""
    if getattr(arguments, "rows", None) != "-":
        return
    if not os.path.exists(STDIN):
        raise CommandError(
            f"ROWS '-' reads the rows from standard input through {STDIN}, which this system "
            "does not have: give the rows' file instead"
        )
    arguments.rows = STDIN
    arguments.stdin = True


def said_of_stdin(text: str, arguments: argparse.Namespace | None) -> str:
    """`text` with standard input named as the user named it, where ROWS was '-'."""
    if arguments is None or not getattr(arguments, "stdin", False):
        return text
    return text.replace(f"{STDIN} is a named pipe", "standard input (ROWS -) is a pipe").replace(
        STDIN, "standard input (ROWS -)"
    )


def not_an_input(
    output: str, *inputs: tuple[str, str], option: str = "--output", written: str = "predictions"
) -> None:
    """Refuse a file to write that is one of the files read (or a link to one): what is
    written would replace what it is made from."""
    for path, what in inputs:
        try:
            same = os.path.samefile(output, path)
        except (OSError, ValueError):  # one of them does not exist (yet): not the same file
            continue
        if same:
            raise CommandError(
                f"{option} {output!r} is {what} read ({path!r}): the {written} would replace "
                "it; name another file"
            )


def plot_target(path: str, *files: tuple[str | None, str]) -> str:
    """The file --plot draws into, checked before the run: matplotlib there, a file name (not a
    folder) in a folder that takes files, of a kind matplotlib draws (a name without one is
    drawn as PNG under that name), none of `files` (what the command reads, or writes)."""
    for other, what in files:
        if other and os.path.realpath(other) == os.path.realpath(path):
            raise CommandError(
                f"--plot {path!r} is {what}: the drawing would replace it; name another"
            )
    try:
        import_module("matplotlib")
    except ImportError:
        raise CommandError(
            "--plot needs matplotlib, which is not installed: pip install 'deepsharp[plot]' "
            "(or matplotlib), or leave --plot out"
        ) from None
    writable(path, "--plot", through=False)
    try:
        image_kind(path, "--plot")
    except ValueError as error:
        raise CommandError(str(error)) from None
    return path


def add_imports(command: argparse.ArgumentParser) -> None:
    """`--import MODULE` on a command that reads a file of layers (losses, activations) of
    one's own."""
    command.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (again for more): where the file's layers, losses or "
        "activations of your own are defined; looked for in the current folder first",
    )
