"""Scanned files: scan_csv reads by read_csv's rules a part at a time, naming file and line in
every error; scan_parquet reads Parquet's columns as a DataFrame's would be."""

from __future__ import annotations

import gzip
import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import DataError, FileFormatError, Pipeline, read_csv, scan_csv, scan_parquet
from deepsharp.core.data.sources import Part
from deepsharp.core.samples import passengers, titanic

HOSTILE = (
    "\ufeffname,age,note\n"
    'Ann,31,"likes, commas"\n'
    "\n"
    "Bob,,\n"
    '"Cy ""the"" third",7,"two\nlines"\n'
    "\n"
    "Dee,40,plain\n"
)


def _rows(parts: list[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        names = list(part.columns)
        out.extend(dict(zip(names, values)) for values in zip(*part.columns.values()))
    return out


@pytest.mark.parametrize("read_rows", [1, 2, 3, 1000])
def test_a_csv_scan_gives_read_csv_s_rows_in_parts_of_at_most_read_rows(
    tmp_path: Path, read_rows: int
) -> None:
    path = tmp_path / "hostile.csv"
    path.write_text(HOSTILE, encoding="utf-8")
    scan = scan_csv(path, read_rows=read_rows)
    parts = list(scan.parts())
    assert scan.names == ["name", "age", "note"]
    assert all(0 < len(part) <= read_rows for part in parts)
    assert _rows(parts) == read_csv(path)  # an empty field is None; blank lines skipped
    assert [part.first for part in parts] == [sum(map(len, parts[:i])) for i in range(len(parts))]


def test_a_scan_reads_only_the_columns_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "hostile.csv"
    path.write_text(HOSTILE, encoding="utf-8")
    (part,) = scan_csv(path).parts(["note", "age"])
    assert list(part.columns) == ["note", "age"]
    with pytest.raises(
        DataError, match=r"hostile.csv: the file has no column 'Age' \(did you mean 'age'\?\); its"
    ):
        next(scan_csv(path).parts(["Age"]))


def _refused_alike(path: Path, read_rows: int) -> str:
    """What read_csv and scan_csv (its parts of `read_rows`) both say of the file: the same."""
    with pytest.raises(DataError) as by_read_csv:
        read_csv(path)
    with pytest.raises(DataError) as by_scan:
        for _ in scan_csv(path, read_rows=read_rows).parts():
            pass
    assert str(by_scan.value) == str(by_read_csv.value)
    return str(by_scan.value)


@pytest.mark.parametrize("read_rows", [1, 2, 1000])
def test_a_row_of_the_wrong_width_is_named_by_the_line_read_csv_names(
    tmp_path: Path, read_rows: int
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HOSTILE + "Eve,1,2,3\nFay,2,ok\n", encoding="utf-8")
    said = _refused_alike(path, read_rows)
    assert "bad.csv, line 9: this row has 4 fields but the header has 3" in said


@pytest.mark.parametrize("read_rows", [1, 2, 3, 1000])
@pytest.mark.parametrize("newline_at_end", [True, False])
def test_a_quote_left_open_in_the_last_column_is_refused_not_read_as_one_field(
    tmp_path: Path, read_rows: int, newline_at_end: bool
) -> None:
    """Failed before: a quote opened in the last column and never closed took the rest of the
    file as that field, silently: 10 rows read as 3, the row's width unchanged."""
    lines = [f"{i % 5},{i % 2},note {i}" for i in range(10)]
    lines[2] = '2,0,"note 2 with a stray quote'
    path = tmp_path / "open.csv"
    path.write_text("x,label,comment\n" + "\n".join(lines) + ("\n" if newline_at_end else ""))
    said = _refused_alike(path, read_rows)
    assert said == (
        f'{path}, line 4: field 3 of this row opens a quote (") that is never closed, so the row '
        "runs on to the end of the file (line 11), taking every line after it as that field; "
        'close the quote where the field ends (a quote inside a field is written twice: "")'
    )
    # a quoted field over lines that closes, last in the file, is read as it is
    path.write_text('x,label,comment\n1,0,"two\nlines"\n2,1,"ends with a break\n"\n')
    assert [row["comment"] for row in read_csv(path)] == ["two\nlines", "ends with a break\n"]
    parts = list(scan_csv(path, read_rows=read_rows).parts())
    assert [text for part in parts for text in part.columns["comment"]] == [
        "two\nlines",
        "ends with a break\n",
    ]


@pytest.mark.parametrize("read_rows", [1, 2, 1000])
@pytest.mark.parametrize("closed", [False, True])
def test_a_quote_left_open_is_named_by_the_line_it_opens_on(
    tmp_path: Path, read_rows: int, closed: bool
) -> None:
    """Failed before: the row was named by the line it ended on (the file's last, where the
    quote ran to its end) and its field count, never the line where the quote opened."""
    path = tmp_path / "open.csv"
    rest = "Gus,3,x\n" * 5 + ('end",5,y\n' if closed else "")  # lines 12-16 (and 17)
    path.write_text(HOSTILE + "Eve,1,2\n\n" + 'Fay,"2,ok\n' + rest, encoding="utf-8")
    said = _refused_alike(path, read_rows)
    end = 17 if closed else 16
    assert said.startswith(
        f"{path}, line 11: this row has {4 if closed else 2} fields but the header has 3: its "
        f'field 2 opens a quote (") that is not closed on the line, so the row runs on to line '
        f"{end}"
    ), said


@pytest.mark.parametrize("read_rows", [1, 2, 1000])
def test_a_bad_value_is_named_by_file_and_line_even_after_blank_lines_and_long_records(
    tmp_path: Path, read_rows: int
) -> None:
    path = tmp_path / "ages.csv"
    path.write_text(HOSTILE + "Eve,old,x\n", encoding="utf-8")
    pipeline = Pipeline().number("age").target("name", kind="classes")
    scan = scan_csv(path, read_rows=read_rows)
    learning = pipeline.learning(scan.names)
    with pytest.raises(
        DataError, match=r"ages.csv, line 9, column 'age': expected a number, found 'old'"
    ):
        for part in scan.parts(learning.reads):
            learning.add(part)
    assert not pipeline.is_learned


def test_text_that_is_not_utf8_is_named_as_read_csv_names_it(tmp_path: Path) -> None:
    latin = tmp_path / "latin.csv"
    latin.write_bytes("a,b\n1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError) as by_read_csv:
        read_csv(latin)
    with pytest.raises(DataError) as by_scan:
        list(scan_csv(latin).parts())
    assert str(by_scan.value) == str(by_read_csv.value)
    assert "save it as UTF-8 (iconv -f latin1 -t utf-8" in str(by_scan.value)


def test_a_field_longer_than_csv_s_own_limit_is_read(tmp_path: Path) -> None:
    """Before (trial PL): a field over 131,072 characters (an image of 3 x 128 x 128 pixels as
    text) was 'not valid CSV: field larger than field limit', in a valid file."""
    long = tmp_path / "long.csv"
    pixels = " ".join(str(i % 256) for i in range(3 * 128 * 128))  # 175 KB
    long.write_text(f'a,b\n1,2\n3,"{pixels}"\n', encoding="utf-8")
    rows = read_csv(long)
    assert rows[1]["b"] == pixels and _rows(list(scan_csv(long).parts())) == rows
    features = Pipeline().image("b", (3, 128, 128), scale=None).learn(rows[1:]).features(rows[1:])
    assert features.shape == (1, 3 * 128 * 128) and features[0, 257] == 1.0


def test_files_that_are_no_csv_files_are_refused_as_read_csv_refuses_them(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("\n\n", encoding="utf-8")
    twice = tmp_path / "twice.csv"
    twice.write_text("a,a\n1,2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty.csv: the file is empty; expected a header row"):
        scan_csv(empty)
    with pytest.raises(DataError, match=r"twice.csv, line 1: the header names column 'a' twice"):
        scan_csv(twice)
    with pytest.raises(FileNotFoundError, match="no such CSV file"):
        scan_csv(tmp_path / "absent.csv")
    with pytest.raises(IsADirectoryError):
        scan_csv(tmp_path)
    with pytest.raises(ValueError, match="read_rows is a whole number of rows, 1 or more"):
        scan_csv(empty, read_rows=0)


def test_a_header_only_file_has_no_parts(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("a,b\n", encoding="utf-8")
    assert list(scan_csv(path).parts()) == []


def test_parts_learn_the_recipe_that_all_the_rows_teach_at_once(tmp_path: Path) -> None:
    path = tmp_path / "passengers.csv"
    passengers.write_csv(path, 3_000, seed=5)
    whole = titanic.pipeline().learn(read_csv(path)).to_json()
    pipeline = titanic.pipeline()
    scan = scan_csv(path, read_rows=701)
    learning = pipeline.learning(scan.names)
    for part in scan.parts(learning.reads):
        learning.add(part)
    parts = learning.finish().to_json()
    for mine, theirs in zip(parts["columns"], whole["columns"], strict=True):
        learned, wanted = mine.pop("learned"), theirs.pop("learned")
        assert mine == theirs
        if mine["kind"] != "number":
            assert learned == wanted  # categories in the same order, exactly
            continue
        assert learned["fill"] == wanted["fill"]  # the median, exactly
        assert learned["mean"] == pytest.approx(wanted["mean"], rel=1e-13)
        assert learned["std"] == pytest.approx(wanted["std"], rel=1e-13)
    assert parts["target"] == whole["target"]


# --- Parquet ---------------------------------------------------------------------------------


def test_without_pyarrow_a_parquet_scan_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as where pyarrow is not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(
        ImportError, match=r"pip install 'deepsharp\[parquet\]' \(or pip install pyarrow\)"
    ):
        scan_parquet(path)


def test_a_parquet_file_naming_a_column_twice_is_refused_as_a_csv_header_is(
    tmp_path: Path,
) -> None:
    """Before: pyarrow read both columns for the name, every column after it shifted one place:
    the category took the second 'x''s numbers and the target the category's text, silently."""
    arrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    columns = [arrow.array([1.0, 2.0]), arrow.array(["a", "b"]), arrow.array([0, 1])]
    table = arrow.Table.from_arrays([*columns, arrow.array([5.0, 6.0])], ["x", "c", "y", "x"])
    parquet.write_table(table, tmp_path / "twice.parquet")
    with pytest.raises(DataError, match=r"twice.parquet: its schema names column 'x' twice"):
        scan_parquet(tmp_path / "twice.parquet")


def test_a_file_that_is_not_utf8_is_named_by_its_line_or_by_what_it_is(tmp_path: Path) -> None:
    """Before (trial AC): "not UTF-8 text: 'utf-8' codec can't decode byte 0xe9 in position
    7508" — an offset in a decoder's buffer (the byte was on line 2,501), no line, nothing to
    do; a gzip, UTF-16 or Parquet file said the same."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"name,y\n" + b"abc,1\n" * 2499 + "Ren\u00e9,0\n".encode("latin-1"))
    said = r"latin\.csv, line 2501: not UTF-8 text \(the byte 0xe9 at its character 4\): save"
    for read in (read_csv, lambda p: [part.count for part in scan_csv(p).parts()]):
        with pytest.raises(DataError, match=said):
            read(latin)
    kinds = {
        "rows.csv.gz": (gzip.compress(b"a,y\n1,0\n"), "gzip-compressed: decompress it first"),
        "u16.csv": ("a,y\n1,0\n".encode("utf-16"), "UTF-16 text: save it as UTF-8"),
        "rows.parquet": (b"PAR1\xf0\x9f\xff\x00PAR1", "a Parquet file: scan it with scan_parquet"),
    }
    for name, (data, what) in kinds.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=rf"{re.escape(name)}: not UTF-8 text but {what}"):
            read_csv(tmp_path / name)


def test_the_index_pandas_saved_in_a_parquet_file_is_no_column_of_its_scan(
    tmp_path: Path,
) -> None:
    """Failed before (trial AC): a filtered DataFrame saved with to_parquet keeps its index as
    the column '__index_level_0__', which pandas reads back as the index; the scan gave it as a
    column, learned as a feature by .numbers() that the DataFrame then lacked."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"a": np.arange(12.0), "y": np.arange(12) % 2})
    kept = frame[frame.a % 3 != 0]
    kept.to_parquet(tmp_path / "rows.parquet")
    named = frame.set_index("a")
    named.to_parquet(tmp_path / "named.parquet")
    assert scan_parquet(tmp_path / "rows.parquet").names == list(pd.read_parquet(
        tmp_path / "rows.parquet").columns) == ["a", "y"]  # fmt: skip
    assert scan_parquet(tmp_path / "named.parquet").names == ["y"]
    scanned = scan_parquet(tmp_path / "rows.parquet")
    learned = Pipeline().numbers().target("y")
    learning = learned.learning(scanned.names)
    for part in scanned.parts(learning.reads):
        learning.add(part)
    learning.finish()
    assert learned.feature_names == Pipeline().numbers().target("y").learn(kept).feature_names


def test_a_parquet_scan_gives_numbers_as_arrays_and_the_rest_as_python_values(
    tmp_path: Path,
) -> None:
    arrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    table = arrow.table(
        {
            "whole": arrow.array([1, None, 3], arrow.int64()),
            "real": arrow.array([0.5, 1.5, None]),
            "text": arrow.array(["a", None, "c"]).dictionary_encode(),
            "yes": arrow.array([True, None, False]),
            "money": arrow.array([1, 2, 3], arrow.decimal128(5, 2)),
        }
    )
    path = tmp_path / "kinds.parquet"
    parquet.write_table(table, path, row_group_size=2)
    scan = scan_parquet(path, read_rows=2)
    parts = list(scan.parts())
    assert scan.names == ["whole", "real", "text", "yes", "money"]
    assert [len(p) for p in parts] == [2, 1]
    first = parts[0].columns
    np.testing.assert_array_equal(first["whole"], [1.0, np.nan])
    np.testing.assert_array_equal(first["real"], [0.5, 1.5])
    assert first["money"] == [Decimal("1.00"), Decimal("2.00")]  # their digits, as a CSV's
    assert first["text"] == ["a", None]
    assert first["yes"] == [True, None]
    assert parts[1].row_text(0) == f"{path}, row 3 (counting from 1)"


def test_a_file_pyarrow_cannot_read_is_a_file_format_error_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(
        FileFormatError, match=r"broken.parquet: not a Parquet file pyarrow can read"
    ):
        scan_parquet(path)


def test_every_damaged_parquet_file_is_read_whole_or_refused_with_our_errors(
    tmp_path: Path,
) -> None:
    """fuzz_parquet.py's CI-sized run: 1,000 damaged copies, each in bounded time and memory."""
    import json
    import subprocess

    pytest.importorskip("pyarrow")
    fuzzer = Path(__file__).with_name("fuzz_parquet.py")
    summary = tmp_path / "parquet.json"
    done = subprocess.run(
        [
            *(sys.executable, str(fuzzer), "--files", "1000", "--seed", "20261204"),
            *("--seconds", "30", "--json", str(summary)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    census = json.loads(summary.read_text())
    # before: 747 of 3,000 copies raised a raw OSError (thrift, snappy) or UnicodeDecodeError
    assert census["failures"] == [], census["failures"][:5]
    assert census["outcomes"]["refused (FileFormatError)"] > 500
    assert census["peak_rss_growth_mib"] < 100


def test_parquet_and_csv_of_the_same_rows_make_the_same_features(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    passengers.write_csv(tmp_path / "p.csv", 2_000, seed=1)
    passengers.write_parquet(tmp_path / "p.parquet", 2_000, seed=1, row_group_rows=512)
    made = []
    for scan in (scan_csv(tmp_path / "p.csv"), scan_parquet(tmp_path / "p.parquet")):
        pipeline = titanic.pipeline()
        learning = pipeline.learning(scan.names)
        for part in scan.parts(learning.reads):
            learning.add(part)
        learning.finish()
        made.append(
            (
                pipeline.to_json(),
                np.concatenate([pipeline.features(p) for p in scan.parts(learning.reads)]),
            )
        )
    assert made[0][0]["columns"] == made[1][0]["columns"]
    np.testing.assert_array_equal(made[0][1], made[1][1])


# --- what is not a regular file: never a hang, never unbounded growth -------------------------

READER = """
import json, resource, sys
from deepsharp.core import read_csv, scan_csv, scan_parquet
reader, path = sys.argv[1], sys.argv[2]
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
def peak():
    with open("/proc/self/status") as lines:
        return next(int(l.split()[1]) / 1024 for l in lines if l.startswith("VmHWM:"))
before = peak()
try:
    if reader == "read_csv":
        said = len(read_csv(path))
    else:
        scan = {"scan_csv": scan_csv, "scan_parquet": scan_parquet}[reader](path)
        said = [len(part) for part in scan.parts()]
        said = [said, [len(part) for part in scan.parts()]]  # a second pass
    outcome, message = "read", repr(said)
except BaseException as error:
    outcome, message = type(error).__name__, str(error)
print(json.dumps({"outcome": outcome, "message": message, "growth_mib": peak() - before}))
"""


def _read_in_child(reader: str, path: str | Path, feed: bytes | None = None) -> dict[str, Any]:
    """`reader` on `path` in a fresh process capped at 3 GB, with `feed` written into a pipe
    at `path` by another process (None: nobody writes). Hang detection: 60 s."""
    import json
    import subprocess

    writer = None
    if feed is not None:
        writer = subprocess.Popen(
            [sys.executable, "-c", f"open({str(path)!r}, 'wb').write({feed!r})"]
        )
    try:
        done = subprocess.run(
            [sys.executable, "-c", READER, reader, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if writer is not None:
            writer.kill()
            writer.wait()
    assert done.returncode == 0, done.stderr[-2000:]
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return said


@pytest.mark.parametrize("reader", ["read_csv", "scan_csv"])
def test_a_named_pipe_no_program_writes_into_is_said_to_be_so_at_once(
    tmp_path: Path, reader: str
) -> None:
    pipe = tmp_path / "rows.csv"
    os.mkfifo(pipe)
    said = _read_in_child(reader, pipe)  # before: waited for a writer forever
    assert said["outcome"] == "DataError", said
    assert "is a named pipe that nothing was written into" in said["message"]


def test_a_pipe_is_read_as_a_stream_and_a_scan_of_it_once(tmp_path: Path) -> None:
    pipe = tmp_path / "rows.csv"
    os.mkfifo(pipe)
    said = _read_in_child("read_csv", pipe, b"a,b\n1,2\n3,4\n")
    assert said == {**said, "outcome": "read", "message": "2"}
    said = _read_in_child("scan_csv", pipe, b"a,b\n1,2\n3,4\n")  # before: UnsupportedOperation
    assert said["outcome"] == "FileFormatError", said
    assert "is a named pipe, read once already: its rows cannot be read again" in said["message"]


@pytest.mark.parametrize("reader", ["read_csv", "scan_csv"])
def test_a_line_longer_than_the_limit_is_a_data_error_in_bounded_memory(
    tmp_path: Path, reader: str
) -> None:
    sparse = tmp_path / "sparse.csv"
    with open(sparse, "wb") as file:
        file.truncate(4 << 30)  # 4 GiB of nothing: a line that never ends
    for path in ("/dev/zero", sparse):
        said = _read_in_child(reader, path)  # before: grew to 2.7 GB, or read on and on
        assert said["outcome"] == "DataError", said
        assert said["message"].startswith(f"{path}, line 1: longer than 16,777,216 characters")
        assert said["growth_mib"] < 200, said


@pytest.mark.parametrize("case", ["a named pipe", "/dev/zero"])
def test_a_parquet_scan_refuses_what_is_not_a_regular_file_at_once(
    tmp_path: Path, case: str
) -> None:
    pytest.importorskip("pyarrow")
    path: str | Path = "/dev/zero"
    if case == "a named pipe":
        path = tmp_path / "rows.parquet"
        os.mkfifo(path)
    said = _read_in_child("scan_parquet", path)  # before: a named pipe blocked, deaf to signals
    assert said["outcome"] == "FileFormatError", said
    assert (
        f"is {'a character device' if path == '/dev/zero' else case}, not a file" in said["message"]
    )


@pytest.mark.parametrize("reader", [read_csv, scan_csv])
def test_a_path_with_a_nul_or_a_loop_of_links_is_said_to_be_so(tmp_path: Path, reader: Any) -> None:
    with pytest.raises(FileNotFoundError, match="holds a NUL character, which no file name can"):
        reader(tmp_path / "a\0b.csv")  # before: ValueError: embedded null byte
    (tmp_path / "one.csv").symlink_to(tmp_path / "two.csv")
    (tmp_path / "two.csv").symlink_to(tmp_path / "one.csv")
    with pytest.raises(OSError, match="is a loop of symbolic links") as caught:
        reader(tmp_path / "one.csv")  # before: "no such CSV file"
    assert not isinstance(caught.value, FileNotFoundError)


def test_a_file_changed_since_it_was_scanned_is_refused_as_a_pass_opens_or_ends_it(
    tmp_path: Path,
) -> None:
    """Before: a file rewritten between a run's passes (a log still written, rotated) was read
    as it then was: the recipe learned from 1,000 rows, the features and split made of 400,
    a category renamed in them taken as unseen, silently."""
    path = tmp_path / "grow.csv"
    path.write_text("x,c\n" + "".join(f"{i},a\n" for i in range(100)), encoding="utf-8")
    scan = scan_csv(path, read_rows=10)
    assert sum(part.count for part in scan.parts()) == 100
    os.utime(path, ns=(0, 10**18))  # rewritten: another time (contents alike or not)
    with pytest.raises(DataError, match=r"grow.csv: the file changed since it was scanned: 4"):
        next(scan.parts())
    scan = scan_csv(path, read_rows=10)
    reading = scan.parts()
    next(reading)
    with open(path, "a", encoding="utf-8") as more:  # appended to while a pass reads it
        more.write("100,b\n")
    with pytest.raises(DataError, match=r"as a pass ends; every pass over a scan reads the same"):
        list(reading)
    scan = scan_csv(path, read_rows=10)  # rotated while a pass reads it (trial SV: read on)
    reading = scan.parts()
    next(reading)
    rotated = tmp_path / "rotated.csv"
    rotated.write_bytes(path.read_bytes())
    os.replace(rotated, path)
    with pytest.raises(DataError, match=r"grow.csv: another file is at its path than the one"):
        list(reading)
    path.write_text("x,c\n" + "".join(f"{i},a\n" for i in range(50_000)), encoding="utf-8")
    scan = scan_csv(path, read_rows=10)  # cut short mid-line while a pass reads it
    reading = scan.parts()
    next(reading)
    os.truncate(path, os.path.getsize(path) // 2 + 2)  # past what was read ahead
    with pytest.raises(DataError, match=r"grow.csv: the file changed .* while a pass read it"):
        list(reading)  # before (trial SD): "line 40: this row has 1 fields but the header has 2"

    # A value cut short ("1e5" to "1e") keeps its row's fields: refused by the column that reads
    # it, where the pass is used; said as the change too (it was the row's: a review).
    path.write_text("x,c\n" + "".join(f"{i},1e5\n" for i in range(50_000)), encoding="utf-8")
    scan = scan_csv(path, read_rows=10)
    pipeline = Pipeline().number("x").number("c")
    learning = pipeline.learning(scan.names)
    with pytest.raises(DataError, match=r"grow.csv: the file changed .* while a pass read it"):
        with scan.reading():
            for i, part in enumerate(scan.parts(learning.reads)):
                learning.add(part)
                if i == 0:  # the file cut after "25000,1e", in the middle of a line
                    line = len("x,c\n") + sum(len(f"{k},1e5\n") for k in range(25_000))
                    os.truncate(path, line + len("25000,1e"))
    parquet = pytest.importorskip("pyarrow.parquet")
    arrow = pytest.importorskip("pyarrow")
    parquet.write_table(arrow.table({"x": [1.0, 2.0]}), tmp_path / "rows.parquet")
    scan = scan_parquet(tmp_path / "rows.parquet")
    parquet.write_table(arrow.table({"x": [1.0, 2.0, 3.0]}), tmp_path / "rows.parquet")
    with pytest.raises(DataError, match=r"rows.parquet: the file changed since it was scanned"):
        list(scan.parts())


def test_a_parquet_file_s_ids_and_decimals_learn_the_categories_its_csv_does(
    tmp_path: Path,
) -> None:
    """Failed before (trial BH): whole numbers with a null, and decimals, came through float64:
    IDs beyond 2^53 were rounded (two accounts became one, or another), and the decimal 0.50
    learned "0.5" where the CSV's text is "0.50"."""
    arrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    ids = [9007199254740993, 9007199254740995, None, 9007199254740992]
    money = [Decimal("0.50"), Decimal("1.50"), Decimal("9007199254740993"), None]
    table = arrow.table(
        {
            "account": arrow.array(ids, arrow.int64()),
            "money": arrow.array(money, arrow.decimal128(19, 2)),
            "whole": arrow.array([1, 2, 3, 4], arrow.int64()),
        }
    )
    parquet.write_table(table, tmp_path / "ids.parquet")
    text = "account,money,whole\n" + "".join(
        f"{'' if i is None else i},{'' if m is None else m},{w}\n"
        for i, m, w in zip(ids, money, [1, 2, 3, 4])
    )
    (tmp_path / "ids.csv").write_text(text)

    def learned(scan: Any) -> Pipeline:
        learning = (
            Pipeline().category("account").category("money").number("whole").learning(scan.names)
        )
        for part in scan.parts():
            learning.add(part)
        return learning.finish()

    from_parquet = learned(scan_parquet(tmp_path / "ids.parquet"))
    from_csv = learned(scan_csv(tmp_path / "ids.csv"))
    assert from_parquet.feature_names == from_csv.feature_names
    assert "account=9007199254740993" in from_parquet.feature_names
    assert "money=0.50" in from_parquet.feature_names
    rows = read_csv(tmp_path / "ids.csv")
    np.testing.assert_array_equal(from_parquet.features(rows), from_csv.features(rows))


def test_a_pipeline_s_whole_number_columns_read_the_file_s_columns_of_their_text(
    tmp_path: Path,
) -> None:
    """Failed before (trial CD): a network fit on pd.DataFrame(x), its columns 0, 1, 2, could
    not be served from a file, whose header is text: "the file has no column 0; its columns
    are: '0', '1', '2'" (and the command line has no way to rename a column)."""
    from deepsharp.core import Adam, Dense, FitOptions, MeanSquaredError, Network, fit
    from deepsharp.core.cli import main

    pd = pytest.importorskip("pandas")
    x = np.random.default_rng(0).normal(size=(40, 3))
    frame = pd.DataFrame(x)
    frame["y"] = x[:, 0]
    run = fit(Pipeline().numbers().target("y", kind="number"), frame, Network([Dense(1)]),
              MeanSquaredError(), Adam(0.01), FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    rows = frame.drop(columns="y").head(5)
    wanted = run.trained.predict(rows)
    path = tmp_path / "intcols.csv"
    rows.to_csv(path, index=False)
    np.testing.assert_array_equal(run.trained.predict(scan_csv(path)), wanted)
    (part,) = scan_csv(path).parts([2, 0])
    assert list(part.columns) == [2, 0] and part.columns[0] == [row["0"] for row in read_csv(path)]
    if _has_pyarrow():
        rows.rename(columns=str).to_parquet(tmp_path / "intcols.parquet", index=False)
        served = run.trained.predict(scan_parquet(tmp_path / "intcols.parquet"))
        np.testing.assert_array_equal(served, wanted)
    saved = tmp_path / "intcols.safetensors"
    run.trained.save(saved)
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(saved), str(path), "--output", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 6
    # Only where unambiguous: a column asked for by the number and by its text is not read twice.
    with pytest.raises(
        DataError, match=r"intcols.csv: the file has no column 0 \(the rows name that column '0'"
    ):
        next(scan_csv(path).parts([0, "0"]))
    with pytest.raises(DataError, match=r"intcols.csv: the file has no column 3; its columns"):
        next(scan_csv(path).parts([3]))


def _has_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def test_lines_of_only_spaces_are_skipped_as_blank_lines_are(tmp_path: Path) -> None:
    """Failed before (trial CD): a last line of two spaces, as an editor leaves one, was "this
    row has 1 fields but the header has 3". A file of one column keeps such a line: its row."""
    path = tmp_path / "spaces.csv"
    path.write_text("a,b,c\n1,2,3\n  \n4,5,6\n\t \n\n  \n", encoding="utf-8")
    wanted = [{"a": "1", "b": "2", "c": "3"}, {"a": "4", "b": "5", "c": "6"}]
    assert read_csv(path) == wanted
    for read_rows in (1, 2, 1000):
        assert _rows(list(scan_csv(path, read_rows=read_rows).parts())) == wanted
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,c\n1,2,3\n  \n4,x,6\n", encoding="utf-8")
    pipeline = Pipeline().number("a").number("b").number("c")
    for read_rows in (1, 1000):  # a line after one of spaces is named by its own line
        scan = scan_csv(bad, read_rows=read_rows)
        learning = pipeline.learning(scan.names)
        with pytest.raises(DataError, match=r"bad.csv, line 4, column 'b': expected a number"):
            for part in scan.parts(learning.reads):
                learning.add(part)
    one = tmp_path / "one.csv"
    one.write_text("a\n1\n  \n", encoding="utf-8")
    assert read_csv(one) == [{"a": "1"}, {"a": "  "}]
    assert _rows(list(scan_csv(one).parts())) == read_csv(one)


def test_a_file_without_a_column_lists_its_columns_within_bounds(tmp_path: Path) -> None:
    """Before (trial HC): every column of the header, each name whole, went into the message
    (a header of a million columns made a message of 11 MB)."""
    path = tmp_path / "wide.csv"
    names = [f"c{i}" for i in range(5000)] + ["x" * 100_000]
    path.write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    with pytest.raises(DataError) as caught:
        list(scan_csv(path).parts(["Age"]))
    said = str(caught.value)
    assert "no column 'Age'" in said and "'c0', 'c1'" in said and "and 4,971 more" in said
    assert len(said) < 2000
