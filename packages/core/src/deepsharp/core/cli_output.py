"""The command line's files and standard output: what a FILE option is checked for before
any work, what a failed write left behind, the predictions written to standard output, and an
error of the system said as one line."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from deepsharp.core.atomic import descriptor_of
from deepsharp.core.engine import Engine, make_engine

__all__ = [
    "said_plainly",
    "engine_named",
    "CommandError",
    "checked_checkpoints",
    "interrupted_run",
    "left_behind",
    "quiet_stdout",
    "system_said",
    "to_stdout",
    "writable",
]


class CommandError(Exception):
    """What the command line refuses before it starts, or reports when the system fails it."""


def system_said(error: OSError, doing: str = "", path: str | None = None) -> str:
    """An error of the operating system as one line: the file, what failed, and why."""
    reason = error.strerror or str(error) or type(error).__name__
    named = path if path is not None else error.filename
    if named is None and error.strerror is None and not doing:
        return reason  # an error that says it all itself (a checkpoint folder's)
    where = f" {os.fspath(named)!r}" if named is not None else ""
    return f"{doing or 'cannot open'}{where}: {reason}"


def writable(path: str, option: str, printed: bool = True, through: bool = True) -> None:
    """Refuse, before any work, a FILE that cannot be written: a folder, a missing folder,
    a folder that cannot take a new file (permission, read-only file system); a symbolic link
    is judged by where it leads, as the file is written through it. One of the process's
    descriptors is written through (`through`; --plot's file is opened by matplotlib: it takes
    none); standard input and error are refused, and standard output where the command
    `printed` to it too (a report beside a trained network's bytes): by name, or (output and
    error) by being the very file or pipe."""
    descriptor = descriptor_of(path)
    if descriptor in (0, 2) or (printed and descriptor == 1):
        what = {
            0: "standard input",
            1: "standard output, where the command prints what it did too: the file would "
            "hold both",
            2: "standard error, where the command reports its progress and errors: the file "
            "would hold them too",
        }[descriptor]
        raise CommandError(f"{option} {path!r} is {what}; give a file of its own")
    if descriptor is not None and not through:
        raise CommandError(f"{option} {path!r} is a descriptor of the process; give a file name")
    if descriptor is not None:
        return  # one of this process's descriptors (/dev/stdout): written through it
    target = Path(path)
    if target.is_symlink():
        try:
            os.stat(path)
            leads = True
        except FileNotFoundError:  # to a file not yet there: its folder must be
            leads = Path(os.path.realpath(path)).parent.is_dir()
        except OSError:  # a loop of links
            leads = False
        if not leads:
            raise CommandError(
                f"{option} {path!r} is a symbolic link to {os.readlink(path)!r}, which leads to "
                "no folder (or back to itself): make the folder it names, or give another file"
            )
        target = Path(os.path.realpath(path))
    if target.is_dir():
        raise CommandError(f"{option} {path!r} is a folder; give a file name (in it, or elsewhere)")
    if target.exists() and not target.is_file():
        return  # a device or a pipe (/dev/stdout): written in place
    folder = target.parent
    if not folder.is_dir():
        raise CommandError(f"{option} {path!r}: there is no folder {os.fspath(folder)!r}")
    _takes_files(folder, f"{option} {path!r}")


def left_behind(path: str) -> str:
    """What a failed atomic write left behind, said after its error."""
    if Path(path).is_file():
        return "; the file that was there is unchanged"
    return "" if Path(path).exists() else "; nothing was written"


def to_stdout(parts: Iterable[bytes], each: bool = False, output: bool = True) -> int:
    """Write the parts to standard output as they come (`each`: each seen at once, as text
    written token by token is). `output`: whether the command takes --output FILE instead."""
    if sys.stdout is None:
        raise CommandError(
            "standard output is closed (>&-): "
            + ("give --output FILE, or leave it open" if output else "leave it open")
        )
    try:
        for part in parts:
            sys.stdout.buffer.write(part)
            if each:
                sys.stdout.flush()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (`deepsharp predict ... | head`): quietly
        quiet_stdout()
        return 1
    except OSError as error:  # a full disk, a device that takes nothing (> /dev/full)
        quiet_stdout()
        raise CommandError(system_said(error, "cannot write to standard output")) from None
    return 0


class _OutlivedStdout(io.TextIOBase):
    """Standard output that a command writing a file outlives: once its reader has gone
    (`train ... | head -1`), what is printed goes nowhere and the command goes on to write
    its file (it ended on the first print, the file unwritten: a review)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._went()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._went()

    def _went(self) -> None:
        self.gone = True
        quiet_stdout()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


@contextlib.contextmanager
def outliving_stdout() -> Iterator[None]:
    """Around a command that writes a file: its prints never end it (`_OutlivedStdout`)."""
    held = sys.stdout
    if held is None:
        yield
        return
    sys.stdout = _OutlivedStdout(held)
    try:
        yield
    finally:
        sys.stdout = held


def quiet_stdout() -> None:
    """Standard output to the null device: what is left in Python's buffer goes nowhere (it
    would fail again as the program ends)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def interrupted_run(out: str, folder: str | None) -> str:
    """What `deepsharp train` stopped by Ctrl-C leaves (nothing in `out`; checkpoints in
    `folder`, where one was given), and how to go on."""
    from deepsharp.core.training.checkpoint import Checkpoint

    said = f"interrupted: nothing was written to {out}"
    if folder is None:
        return said + " (--checkpoints FOLDER keeps every epoch, and --resume goes on from it)"
    if not Checkpoint.in_folder(folder):
        return said + f", and no epoch had ended: {folder} holds no checkpoint of this run yet"
    return said + f"; the same command with --resume goes on from the last checkpoint in {folder}"


def checked_checkpoints(folder: str | None, resume: bool, epochs: int) -> str | None:
    """Refuse, before a run starts, a `--checkpoints` folder that is a file, a folder holding an
    earlier run's checkpoints without `--resume` (the two runs' would mix, and `--resume` would
    later take the other's), `--resume` without a folder, and a last checkpoint past
    `--epochs`; under `--resume`, say which checkpoint the run goes on from. The folder to
    resume from, or None (no `--resume`, or no checkpoint in it yet: the run starts afresh)."""
    from deepsharp.core.training.checkpoint import Checkpoint

    if folder is None:
        if resume:
            raise CommandError(
                "--resume goes on from the checkpoints a run wrote with --checkpoints FOLDER: "
                "give that folder too"
            )
        return None
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CommandError(f"--checkpoints {folder}: a file, not a folder: name a folder")
    _folder_takes_files(folder)
    held = Checkpoint.in_folder(folder)
    if held and not resume:
        raise CommandError(
            f"--checkpoints {folder} holds the checkpoints of an earlier run (epochs "
            f"{held[0][0]} to {held[-1][0]}): give --resume to go on from its last, or name "
            "another folder"
        )
    if resume and held and held[-1][0] > epochs:
        raise CommandError(
            f"the last checkpoint in {folder} was taken after epoch {held[-1][0]}, past "
            f"--epochs {epochs}: give --epochs of at least {held[-1][0]} to go on from it"
        )
    if resume:  # said, so that the report's epochs before it are not taken for this run's
        print(
            f"going on from the checkpoint taken after epoch {held[-1][0]} in {folder}"
            if held
            else f"{folder} holds no checkpoint yet: the run starts afresh",
            flush=True,
        )
    return folder if resume and held else None


def _folder_takes_files(folder: str) -> None:
    """Refuse, before the run, a --checkpoints folder the run could not make or write into: a
    link to nothing, a file on its way, a folder (or its nearest one that exists) that takes
    no new file (permission, a read-only file system)."""
    path = Path(folder)
    if path.is_symlink() and not path.exists():
        raise CommandError(
            f"--checkpoints {folder}: a symbolic link to {os.readlink(folder)!r}, which leads to "
            "no folder: make the folder it names, or name another"
        )
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the folder it is made in
    if not probe.is_dir():
        raise CommandError(f"--checkpoints {folder}: {os.fspath(probe)!r} is a file, not a folder")
    _takes_files(probe, f"--checkpoints {folder}")


def _takes_files(folder: Path, said: str) -> None:
    """Refuse a folder that takes no new file (permission, a read-only file system)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise CommandError(
            f"{said}: cannot write into {os.fspath(folder)!r}: {error.strerror or error}"
        ) from None


def seed(text: str) -> int:
    """An argument that is a run's seed: a 64-bit whole number (argparse says which it is not)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"a 64-bit whole number, -2**63 .. 2**63 - 1, not {value}")
    return value


def engine_named(spec: str | None) -> Engine:
    """The engine a spec names; a factory that exits the program instead is refused."""
    try:
        return make_engine(spec)
    except SystemExit as stopped:
        raise CommandError(
            f"the engine {spec!r} exited the program (exit code {stopped.code!r}) instead of "
            "making an engine; give an engine spec or a module:factory that returns one"
        ) from None


@contextlib.contextmanager
def said_plainly() -> Iterator[None]:
    """deepsharp's warnings written as the command's own lines, `deepsharp: warning: ...` (not
    Python's `<frozen runpy>:88: DeepSharpWarning: ...`); others as Python writes them."""
    from deepsharp.core.errors import DeepSharpWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if issubclass(category, DeepSharpWarning):
            print(f"deepsharp: warning: {message}", file=sys.stderr if file is None else file)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
