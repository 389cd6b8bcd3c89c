"""The command line, as a user runs it."""

from __future__ import annotations

import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from deepsharp.core.cli import main
from deepsharp.core.samples import data_path


@pytest.mark.parametrize(
    "command", [[], ["sample"], ["train"], ["predict"], ["evaluate"], ["generate"], ["doctor"]]
)
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--help"])
    assert stopped.value.code == 0
    assert "usage: deepsharp" in capsys.readouterr().out


def test_sample_then_predict_writes_predictions_as_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(saved), "--no-progress"]) == 0
    report = capsys.readouterr().out
    assert "accuracy" in report and "Braund, Mr. Owen Harris" in report
    output = tmp_path / "predictions.csv"
    assert (
        main(["predict", str(saved), str(data_path("titanic.csv")), "--output", str(output)]) == 0
    )
    with open(output, newline="") as file:
        predictions = list(csv.reader(file))
    assert predictions[0] == ["Survived"]
    assert len(predictions) == 892
    assert all(0.0 <= float(row[0]) <= 1.0 for row in predictions[1:])


def test_predict_on_a_missing_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(tmp_path / "none.safetensors"), "rows.csv"]) == 1
    assert "none.safetensors" in capsys.readouterr().err


def test_predict_with_its_two_files_swapped_says_which_comes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["predict", str(data_path("titanic.csv")), str(tmp_path / "model.safetensors")]) == 1
    )
    said = capsys.readouterr().err
    assert "titanic.csv looks like the rows" in said
    assert "the trained network comes first, deepsharp predict FILE ROWS.csv" in said


def test_an_engine_that_is_not_installed_is_refused_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sample", "titanic", "--engine", "nosuch"]) == 1
    assert "nosuch" in capsys.readouterr().err


def test_doctor_lists_the_light_engine_as_usable() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deepsharp.core.cli", "doctor"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "light" in done.stdout and "usable" in done.stdout


def test_doctor_says_where_engines_come_from_only_for_those_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial D): it ended with how to install the engines where every one was."""
    from deepsharp.core import doctor

    if set(doctor.SHIPPED) <= set(doctor.available_engines()):  # (where every one is here)
        doctor.doctor()
        assert "the engines other than light and onnx" not in capsys.readouterr().out
    monkeypatch.setattr(doctor, "available_engines", lambda: ["light", "onnx"])
    doctor.doctor()
    said = capsys.readouterr().out
    assert "not installed: torch, testbuffer; the engines other than light and onnx" in said


# --- everyday failures of the system: one line, a non-zero exit, nothing lost -----------------

ROWS = str(data_path("titanic.csv"))
CHILD = """
import resource, signal, sys
limit, blocked, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
if limit:  # a disk that fills: writes past `limit` bytes fail with EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
if blocked:
    sys.modules[blocked] = None  # as if it were not installed
from deepsharp.core.cli import main
sys.exit(main(argv))
"""


def _cli(
    *argv: str, limit: int = 0, blocked: str = "", prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own, as a user runs it."""
    return subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, str(limit), blocked, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The error it printed, after checking that it is one line, says `words`, and exit is 1."""
    assert done.returncode == 1, (done.returncode, done.stderr)
    error = done.stderr.strip()
    assert "\n" not in error and "Traceback" not in error, error
    assert error.startswith("deepsharp: ")
    for word in words:
        assert word in error, error
    return error


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(path), "--no-progress"]) == 0
    return path


def test_a_folder_as_the_model_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(tmp_path), ROWS]) == 1  # before: IsADirectoryError, traceback
    assert "is a folder, not a file" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--save", "--plot"])
def test_a_folder_to_save_into_is_refused_before_the_run(
    tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib") if option == "--plot" else None
    assert main(["sample", "titanic", option, str(tmp_path), "--no-progress"]) == 1
    said = capsys.readouterr()
    assert "is a folder" in said.err
    assert said.out == ""  # refused before the run: nothing trained, nothing lost


def test_a_plot_of_a_kind_matplotlib_cannot_draw_is_refused_before_the_run(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: `sample --plot curves.txt` trained the whole run, then raised matplotlib's
    traceback; `compare --plot FOLDER` drew FOLDER.png beside the folder; a name without a kind
    was drawn as NAME.png while the message named NAME (now it is drawn as PNG under NAME)."""
    pytest.importorskip("matplotlib")
    assert main(["sample", "titanic", "--plot", str(tmp_path / "c.txt"), "--no-progress"]) == 1
    said = capsys.readouterr()
    assert "matplotlib draws no .txt files; name one of" in said.err and ".png" in said.err
    assert said.out == ""
    compare = ["compare", str(model), ROWS, "--engines", "light", "light:float32", "--rows", "4"]
    assert main([*compare, "--plot", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err
    assert main([*compare, "--plot", str(tmp_path / "r.txt")]) == 1
    assert "matplotlib draws no .txt files" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    assert main(["sample", "titanic", "--epochs", "1", "--plot", str(tmp_path / "c")]) == 0
    assert f"drew the training curves into {tmp_path / 'c'}" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["c"]
    assert (tmp_path / "c").read_bytes().startswith(b"\x89PNG")


def test_a_plot_that_would_replace_a_file_read_or_saved_is_refused_before_the_run(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial SK): `compare --plot` naming the rows (or the model) drew over
    them, and `sample --save F --plot F` saved the network, then drew over it; both exited 0."""
    pytest.importorskip("matplotlib")
    rows = tmp_path / "rows.png"
    rows.write_bytes(Path(ROWS).read_bytes())
    compare = ["compare", str(model), str(rows), "--engines", "light", "light:float32"]
    assert main([*compare, "--plot", str(rows)]) == 1
    assert "is the rows read: the drawing would replace it" in capsys.readouterr().err
    assert rows.read_bytes() == Path(ROWS).read_bytes()
    assert main([*compare[:3], *compare[3:], "--plot", str(model)]) == 1
    assert "is the file compared" in capsys.readouterr().err
    both = str(tmp_path / "both.png")
    assert main(["sample", "titanic", "--save", both, "--plot", both, "--no-progress"]) == 1
    said = capsys.readouterr()
    assert "is the --save file: the drawing would replace it" in said.err and said.out == ""


def test_a_seed_past_64_bits_is_refused_by_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed before (trial SK): a raw ValueError traceback from FitOptions, after train had
    printed its whole pipeline."""
    with pytest.raises(SystemExit) as ended:
        main(["sample", "titanic", "--seed", str(2**63)])
    assert ended.value.code == 2
    assert "--seed: a 64-bit whole number" in capsys.readouterr().err


def test_a_folder_as_the_predictions_file_is_refused_in_one_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(model), ROWS, "--output", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err


def test_predictions_to_a_full_disk_are_one_line(model: Path) -> None:
    done = _cli("predict", str(model), ROWS, "--output", "/dev/full")  # before: traceback
    _one_line(done, "/dev/full", "No space left on device")


def test_predictions_cut_short_by_a_full_disk_leave_the_earlier_file_intact(
    model: Path, tmp_path: Path
) -> None:
    predictions = tmp_path / "predictions.csv"
    predictions.write_text("Survived\n0.5\n")
    done = _cli("predict", str(model), ROWS, "--output", str(predictions), limit=8192)
    _one_line(done, "predictions.csv", "File too large", "unchanged")
    assert (
        predictions.read_text() == "Survived\n0.5\n"
    )  # before: 8,192 bytes of the new predictions
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.csv"]


def test_a_save_cut_short_by_a_full_disk_leaves_the_earlier_file_intact(
    model: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "titanic.safetensors"
    saved.write_bytes(model.read_bytes())
    done = _cli("sample", "titanic", "--save", str(saved), "--no-progress", limit=1024)
    _one_line(done, "titanic.safetensors", "File too large", "unchanged")  # before: traceback
    assert saved.read_bytes() == model.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["titanic.safetensors"]


def test_plot_without_matplotlib_is_refused_before_the_run(tmp_path: Path) -> None:
    done = _cli("sample", "titanic", "--plot", str(tmp_path / "curves.png"), blocked="matplotlib")
    _one_line(done, "--plot needs matplotlib", "pip install")
    assert done.stdout == ""  # before: the whole run, its report, then a traceback


def test_an_engine_factory_that_exits_is_reported_not_taken_for_success() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deepsharp.core.cli", "sample", "titanic", "--engine", "sys:exit"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    _one_line(done, "sys:exit")  # before: exit code 0, nothing trained
    assert done.stdout == ""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder another user can reach (pytest's own are private to this one)."""
    folder = Path(tempfile.mkdtemp(prefix="deepsharp-cli-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _unprivileged(*paths: Path) -> list[str]:
    """A command prefix under which permission bits hold: root without the capabilities that
    pass every check, the files given to `nobody`; anyone else as they are."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root passes every permission check, and there is no setpriv to drop that")
    for path in paths:
        os.chown(path, 65534, 65534)
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def test_permission_denied_is_one_line(model: Path, shared_folder: Path) -> None:
    private = shared_folder / "private.safetensors"
    shutil.copy(model, private)
    private.chmod(0o600)
    locked = shared_folder / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    prefix = _unprivileged(private, locked)
    if not prefix:
        private.chmod(0o000)
    done = _cli("predict", str(private), ROWS, prefix=prefix)
    _one_line(done, "private.safetensors", "Permission denied")  # before: a traceback
    done = _cli("predict", str(model), ROWS, "--output", str(locked / "a.csv"), prefix=prefix)
    _one_line(done, "--output", "Permission denied")


def test_a_file_to_write_through_a_link_to_nowhere_is_refused_before_training(
    shared_folder: Path,
) -> None:
    """Before: `train --out LINK` (a link into a missing folder, or a loop) trained the whole run
    and then failed to save it, the trained network lost."""
    (shared_folder / "dangling").symlink_to("/nowhere/m.safetensors")
    (shared_folder / "one").symlink_to(shared_folder / "two")
    (shared_folder / "two").symlink_to(shared_folder / "one")
    for link in ("dangling", "one"):
        out = str(shared_folder / link)
        done = _cli("train", ROWS, "--target", "Survived", "--out", out, "--no-progress")
        error = _one_line(done, "--out", "is a symbolic link to", "leads to no folder")
        assert "epoch" not in done.stdout, error  # refused before the run, not after it


def test_a_checkpoint_dir_that_takes_no_file_is_named_not_its_probe(shared_folder: Path) -> None:
    """Before: PermissionError named the random temporary file the check made in it."""
    locked = shared_folder / "locked-checkpoints"
    locked.mkdir()
    locked.chmod(0o555)
    prefix = _unprivileged(locked)
    script = (
        "from deepsharp.core.samples import titanic; "
        f"titanic.run(epochs=1, checkpoint_dir={str(locked)!r}, progress=False)"
    )
    done = subprocess.run(
        [*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1
    assert f"PermissionError: checkpoint_dir {str(locked)!r}: cannot write into it" in done.stderr


def test_a_read_only_file_system_is_one_line(model: Path, shared_folder: Path) -> None:
    mount = shared_folder / "readonly"
    mount.mkdir()
    script = (
        f"mount -t tmpfs -o ro,size=1m tmpfs {mount} || exit 77; "
        f"exec {sys.executable} -m deepsharp.core.cli predict {model} {ROWS} --output {mount}/a.csv"
    )
    try:
        done = subprocess.run(
            ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=300
        )
    except FileNotFoundError:
        pytest.skip("no unshare here to mount a read-only file system")
    if done.returncode == 77 or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount a read-only file system here: {done.stderr.strip()}")
    _one_line(done, "Read-only file system")


def _unsealed(model: Path, path: Path) -> Path:
    """`model`'s tensors and metadata written as a file of before digests were recorded."""
    from deepsharp.core.files import read_safetensors

    tensors, metadata = read_safetensors(model)
    header: dict[str, object] = {"__metadata__": metadata}
    body, offset = b"", 0
    for name, value in tensors.items():
        header[name] = {
            "dtype": "F32",
            "shape": list(value.shape),
            "data_offsets": [offset, offset + value.nbytes],
        }
        body, offset = body + value.tobytes(), offset + value.nbytes
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    return path


def test_seal_records_a_digest_and_refuses_a_damaged_file(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deepsharp.core.serving import TrainedNetwork

    old = _unsealed(model, tmp_path / "old.safetensors")
    assert main(["predict", str(old), ROWS]) == 1
    assert f"deepsharp seal {old}" in capsys.readouterr().err
    assert main(["seal", str(old)]) == 0
    assert capsys.readouterr().out == f"recorded the digest of {old}\n"
    assert (
        TrainedNetwork.load(old).network.slots.keys()
        == TrainedNetwork.load(model).network.slots.keys()
    )
    # sealed again (trial NU): checked, and not written again (a hard link stays one)
    linked = tmp_path / "linked.safetensors"
    os.link(old, linked)
    assert main(["seal", str(old)]) == 0
    assert "carries its digest already, and it matches: nothing written" in (
        capsys.readouterr().out
    )
    assert os.path.samefile(old, linked)
    damaged = bytearray(old.read_bytes())
    damaged[-1] ^= 0x40
    old.write_bytes(bytes(damaged))
    assert main(["seal", str(old)]) == 1
    assert "damaged" in capsys.readouterr().err


def test_predictions_to_dev_stdout_go_where_standard_output_goes(
    model: Path, tmp_path: Path
) -> None:
    """Failed before (trial AK): --output /dev/stdout into a file the shell appends to
    replaced that file (renamed over: its earlier lines gone), and into a pipe was refused
    ('cannot write into /proc/N/fd')."""
    log = tmp_path / "log.csv"
    log.write_text("earlier line\n")
    with open(log, "ab") as appended:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, "0", "", "predict", str(model), ROWS, "--output",
             "/dev/stdout"],
            stdout=appended, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = _cli("predict", str(model), ROWS).stdout
    assert log.read_text() == "earlier line\n" + expected
    piped = _cli("predict", str(model), ROWS, "--output", "/dev/stdout")  # stdout: a pipe
    assert piped.returncode == 0 and piped.stdout == expected, piped.stderr
    # a trained network or an ONNX file into the standard output the command prints its
    # report to would hold both: refused (trial AL: a file that did not load, exit 0)
    for argv in (
        ["sample", "titanic", "--save", "/dev/stdout", "--no-progress"],
        ["export", str(model), "/dev/stdout"],
    ):
        _one_line(_cli(*argv), "is standard output, where the command prints what it did too")


def test_standard_input_and_error_and_a_link_to_output_are_no_files_to_write(
    model: Path, tmp_path: Path
) -> None:
    """Failed before (trial AN): --output /dev/stdin with a file as standard input replaced
    that file; --plot /dev/stderr wrote the PNG and the message into one file (any FILE to
    standard error would); a link to
    /dev/stdout as --save, with output appended to a file, replaced that file."""
    precious = tmp_path / "precious.csv"
    precious.write_bytes(Path(ROWS).read_bytes())
    script = f'exec "$0" "$@" < {precious}'
    stdin = _cli(
        "predict", str(model), ROWS, "--output", "/dev/stdin", prefix=["bash", "-c", script]
    )
    _one_line(stdin, "is standard input")
    assert precious.read_bytes() == Path(ROWS).read_bytes()
    stderr = _cli("sample", "titanic", "--save", "/dev/stderr", "--no-progress")
    _one_line(stderr, "is standard error")
    out = tmp_path / "out.csv"  # the very file standard error goes to (trial AO: mixed)
    mixed = _cli("predict", str(model), ROWS, "--output", str(out),
                 prefix=["bash", "-c", f'exec "$0" "$@" 2> {out}'])  # fmt: skip
    assert mixed.returncode == 1 and "is standard error" in out.read_text()
    unread = f'exec "$0" "$@" < {precious}'  # a file that is standard input, never read
    fine = _cli(
        "predict", str(model), ROWS, "--output", str(precious), prefix=["bash", "-c", unread]
    )
    assert fine.returncode == 0, fine.stderr
    link, log = tmp_path / "link", tmp_path / "log.txt"
    link.symlink_to("/dev/stdout")
    log.write_text("earlier\n")
    appended = f'exec "$0" "$@" >> {log}'
    save = _cli(
        "sample", "titanic", "--save", str(link), "--no-progress", prefix=["bash", "-c", appended]
    )
    _one_line(save, "is standard output")
    assert log.read_text() == "earlier\n"


def test_a_closed_or_full_standard_output_is_said_in_one_line(model: Path) -> None:
    """Failed before (trial AK): with stdout closed (>&-) a traceback ('NoneType' object has no
    attribute 'buffer'); into /dev/full, 'cannot open: No space left on device', of no file."""
    closed = _cli("predict", str(model), ROWS, prefix=["bash", "-c", '"$0" "$@" >&-'])
    _one_line(closed, "standard output is closed", "--output FILE")
    full = _cli("predict", str(model), ROWS, prefix=["bash", "-c", '"$0" "$@" > /dev/full'])
    _one_line(full, "cannot write to standard output: No space left on device")


def test_import_from_a_removed_working_folder_says_so(model: Path, tmp_path: Path) -> None:
    """Before (trial AK): '[Errno 2] No such file or directory', naming nothing."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd {gone} && rmdir {gone} && exec "$0" "$@"'
    numpy = subprocess.run(["bash", "-c", script, sys.executable, "-c", "import numpy"],
                           capture_output=True, timeout=120)  # fmt: skip
    gone.mkdir()
    if numpy.returncode:  # Python 3.13's NumPy 2.4 raises SystemError there, before any of ours
        pytest.skip("NumPy itself cannot be imported from a removed working folder here")
    done = _cli("predict", str(model), ROWS, "--import", "json", prefix=["bash", "-c", script])
    _one_line(done, "the current folder, which no longer exists")


# --- rows from what is not a regular file ----------------------------------------------------


INTERRUPTED_IMPORTING = """
import sys
class Interrupt:  # Ctrl-C while the library is imported, before the command's own handling
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from deepsharp.__main__ import main
sys.exit(main())
"""


def test_ctrl_c_while_the_library_is_imported_is_one_line() -> None:
    """Before (trial SK): Ctrl-C in the command's first 0.3 s printed a traceback."""
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORTING, "doctor"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr, done.stdout) == (130, "deepsharp: interrupted\n", "")


def test_a_named_pipe_nothing_writes_into_is_one_line_at_once(model: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "rows.csv"
    os.mkfifo(pipe)
    done = _cli("predict", str(model), str(pipe))  # before: waited for a writer forever
    _one_line(done, "rows.csv", "is a named pipe that nothing was written into")
    assert done.stdout == ""


# --- the smaller refusals -----------------------------------------------------------------------


def test_output_naming_an_input_is_refused_before_anything_is_written(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.csv"
    shutil.copy(ROWS, rows)
    before = rows.read_bytes()
    link = tmp_path / "link.csv"
    link.symlink_to(rows)
    for output, named in ((rows, "the rows"), (link, "the rows"), (model, "the trained network")):
        assert main(["predict", str(model), str(rows), "--output", str(output)]) == 1
        said = capsys.readouterr()
        assert f"--output {str(output)!r} is {named} read" in said.err, said.err
        assert said.out == ""
    assert rows.read_bytes() == before  # before: replaced by its predictions
    assert rows.exists() and link.is_symlink()


def test_a_failing_prediction_prints_nothing_on_stdout(model: Path, tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("PassengerId,Name\n1,Ann\n")
    done = _cli("predict", str(model), str(rows))
    _one_line(done, "no column")
    assert done.stdout == ""  # before: the CSV header, then the error


def test_a_header_only_csv_is_refused_as_read_csv_s_rows_are(model: Path, tmp_path: Path) -> None:
    from deepsharp.core import DataError, read_csv, scan_csv
    from deepsharp.core.serving import TrainedNetwork

    rows = tmp_path / "header.csv"
    rows.write_text(open(ROWS).readline())
    trained = TrainedNetwork.load(model)
    with pytest.raises(DataError, match="no rows"):
        trained.predict(read_csv(rows))
    with pytest.raises(DataError, match=r"header.csv: no rows: the file holds its header"):
        trained.predict(scan_csv(rows))  # before: 0 predictions
    done = _cli("predict", str(model), str(rows))
    _one_line(done, "no rows")
    assert done.stdout == ""


def test_predict_reads_a_parquet_file_and_without_pyarrow_names_the_extra(
    model: Path, tmp_path: Path
) -> None:
    """Failed before (trial CD): a Parquet file was "not UTF-8 text but a Parquet file: scan it
    with scan_parquet(path)", a call the command line does not have."""
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow.parquet")
    rows = tmp_path / "rows.parquet"
    pandas.read_csv(ROWS, dtype={"Cabin": str}).head(50).to_parquet(rows, index=False)
    head = tmp_path / "head.csv"
    head.write_text("".join(open(ROWS).readlines()[:51]))
    from_csv, from_parquet = tmp_path / "csv.out", tmp_path / "parquet.out"
    assert main(["predict", str(model), str(head), "--output", str(from_csv)]) == 0
    assert main(["predict", str(model), str(rows), "--output", str(from_parquet)]) == 0
    assert from_parquet.read_text() == from_csv.read_text()
    assert len(from_parquet.read_text().splitlines()) == 51
    done = _cli("predict", str(model), str(rows), blocked="pyarrow")
    _one_line(done, "rows.parquet is a Parquet file", "pip install 'deepsharp[parquet]'")


def test_seal_leaves_a_safetensors_file_deepsharp_did_not_save_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: it wrote a digest into another tool's file and said it had recorded it."""
    import numpy as np

    from deepsharp.core.files import write_safetensors

    foreign = tmp_path / "foreign.safetensors"
    write_safetensors(foreign, {"w": np.ones(3, np.float32)}, {})
    before = foreign.read_bytes()
    assert main(["seal", str(foreign)]) == 1
    assert "a safetensors file deepsharp did not save" in capsys.readouterr().err
    assert foreign.read_bytes() == before


def test_seal_writes_through_a_link_and_names_a_folder_it_cannot_write_into(
    model: Path, shared_folder: Path
) -> None:
    real = _unsealed(model, shared_folder / "model.safetensors")
    link = shared_folder / "link.safetensors"
    link.symlink_to(real)
    assert main(["seal", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)  # before: replaced by a file
    locked = shared_folder / "locked"
    locked.mkdir()
    _unsealed(model, locked / "model.safetensors")
    locked.chmod(0o555)
    prefix = _unprivileged(locked, locked / "model.safetensors")
    done = _cli("seal", str(locked / "model.safetensors"), prefix=prefix)
    error = _one_line(done, "model.safetensors", "cannot write into", "Permission denied")
    assert ".tmp" not in error  # before: named its temporary file


def test_a_binary_target_of_named_labels_heads_its_column_with_the_positive_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deepsharp.core import Adam, BinaryCrossEntropy, Dense, FitOptions, Network, Pipeline, fit

    rows = [{"size": str(i % 7), "label": "spam" if i % 3 else "ham"} for i in range(60)]
    run = fit(
        Pipeline().number("size").target("label", kind="binary"),
        rows,
        Network([Dense(1)]),
        BinaryCrossEntropy(),
        Adam(),
        FitOptions(seed=0, epochs=1, progress=False),
    )
    saved, table = tmp_path / "spam.safetensors", tmp_path / "rows.csv"
    run.trained.save(saved)
    table.write_text("size\n3\n5\n")
    assert main(["predict", str(saved), str(table)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "label=spam"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["sample", "titanic", "--save", ""], "--save is empty: give a file name (or leave"),
        (["sample", "titanic", "--plot", ""], "--plot is empty: give a file name (or leave"),
        (["predict", "MODEL", ROWS, "--output", ""], "--output is empty: give a file name (or"),
        (["train", ROWS, "--target", "Survived", "--out", ""], "--out is empty: give a file name"),
        (["export", "MODEL", ""], "OUT.onnx is empty: give a file name"),
    ],
)
def test_a_file_to_write_named_by_empty_text_is_refused(
    argv: list[str], said: str, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: --save '' and --plot '' did nothing, saying nothing; --output '' wrote the
    predictions to stdout; --out '' and export's '' were called a folder."""
    argv = [str(model) if a == "MODEL" else a for a in argv]
    assert main([*argv, "--no-progress"] if argv[0] == "sample" else argv) == 1
    captured = capsys.readouterr()
    assert said in captured.err and captured.out == ""


def test_train_and_export_refuse_to_write_over_the_file_they_read(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: train --out ROWS replaced the rows with the trained network, and export
    MODEL MODEL the network with its ONNX file, both exiting 0."""
    rows = tmp_path / "rows.csv"
    shutil.copy(ROWS, rows)
    before = rows.read_bytes(), model.read_bytes()
    assert main(["train", str(rows), "--target", "Survived", "--out", str(rows)]) == 1
    assert "--out" in capsys.readouterr().err and rows.read_bytes() == before[0]
    assert main(["export", str(model), str(model)]) == 1
    said = capsys.readouterr().err
    assert "OUT.onnx" in said and "the trained network read" in said
    assert model.read_bytes() == before[1]


def test_running_out_of_memory_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: a MemoryError (a hostile file's network, a machine too small) came out as
    a traceback."""
    from deepsharp.core import cli

    def exhausted() -> int:
        raise MemoryError("Unable to allocate 2.00 GiB for an array with shape (32, 8, 2097152)")

    monkeypatch.setattr(cli, "doctor", exhausted)
    assert main(["doctor"]) == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("deepsharp: out of memory: Unable to")

    def wordless() -> int:  # (as Python's own allocator raises it: trial ST5 read "memory:  (")
        raise MemoryError

    monkeypatch.setattr(cli, "doctor", wordless)
    assert main(["doctor"]) == 1
    said = capsys.readouterr().err
    assert said.startswith("deepsharp: out of memory: an array could not be made")
    assert "scan_csv(path)" in said
