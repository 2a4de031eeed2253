"""The SWF reader and the cleaning rules (docs/simulation.md, "Jobs")."""

import gzip

import numpy as np
import pytest

from ddppo_hpc.data import TraceError, read_swf
from ddppo_hpc.data.swf import parse_swf


def swf_line(id, submit, runtime, alloc, req_procs=-1, req_time=-1, user=1, group=2, queue=3):
    f = [id, submit, -1, runtime, alloc, -1, -1, req_procs, req_time, -1, 1, user, group, -1]
    return " ".join(map(str, [*f, queue, -1, -1, -1]))


TINY = "\n".join(
    [
        "; MaxNodes: 64",
        "; MaxProcs: 8",
        swf_line(3, 20, 5, 2, req_time=50),
        swf_line(1, 10, 7, -1, req_procs=4),  # procs from the request
        swf_line(2, 10, 9, 3, req_procs=1, req_time=0),  # request 0 -> runtime
        swf_line(4, 5, -1, 2),  # negative runtime
        swf_line(5, 6, 3, -1),  # no procs
        swf_line(6, 7, 3, 9),  # larger than the 8-proc machine
        "",
        swf_line(7, 30, 0, 1, req_time=60, queue=-1) + " 99 98",  # extra columns ignored
    ]
)


def write(tmp_path, text, name="t.swf"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_fields_drops_and_order(tmp_path):
    t = read_swf(write(tmp_path, TINY))
    assert t.machine_procs == 8
    assert t.dropped == {"negative_runtime": 1, "no_procs": 1, "too_large": 1}
    assert t.id.tolist() == [1, 2, 3, 7]  # by (submit, id)
    assert t.submit.tolist() == [10, 10, 20, 30]
    assert t.procs.tolist() == [4, 3, 2, 1]
    assert t.requested_time.tolist() == [7, 9, 50, 60]
    assert t.runtime.tolist() == [7, 9, 5, 0]
    assert t.user.tolist() == [1, 1, 1, 1]
    assert t.queue.tolist() == [3, 3, 3, -1]


def test_gzip_reads_the_same(tmp_path):
    plain = read_swf(write(tmp_path, TINY))
    gz = tmp_path / "t.swf.gz"
    gz.write_bytes(gzip.compress(TINY.encode()))
    packed = read_swf(gz)
    for name in ("id", "submit", "runtime", "requested_time", "procs", "user"):
        assert np.array_equal(getattr(plain, name), getattr(packed, name))


@pytest.mark.parametrize(
    ("header", "option", "machine", "too_large"),
    [
        ("; MaxProcs: 8\n; MaxNodes: 64\n", None, 8, 1),
        ("; MaxNodes: 4\n", None, 4, 2),
        ("; MaxProcs: -1\n", None, 9, 0),  # no usable header: the largest job
        ("; MaxProcs: 8\n", 16, 16, 0),  # the option wins
    ],
)
def test_machine_size_rules(tmp_path, header, option, machine, too_large):
    jobs = "\n".join([swf_line(1, 0, 5, 2), swf_line(2, 1, 5, 9), swf_line(3, 2, 5, 5)])
    t = read_swf(write(tmp_path, header + jobs), machine_procs=option)
    assert t.machine_procs == machine
    assert t.dropped["too_large"] == too_large


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 0 -1 5 2", "expected 18 fields, found 5"),
        (swf_line(1, 0, "abc", 2), "field 4 (run time) is not a number: 'abc'"),
        (swf_line(1, 0, 5, 2.5), "field 5 (allocated procs) is not an integer"),
        (swf_line(1, "nan", 5, 2), "field 2 (submit time) is not a number"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path, line, message):
    path = write(tmp_path, "; MaxProcs: 8\n" + swf_line(9, 0, 1, 1) + "\n" + line + "\n")
    with pytest.raises(TraceError) as e:
        read_swf(path)
    assert str(e.value).startswith(f"{path}:3: ")
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("value", "shown"), [(b"\xff\xfe7", r"'\xff\xfe7'"), (b"x" * 100, "'" + "x" * 40 + "'...")]
)
def test_a_bad_field_is_quoted_short_and_escaped(tmp_path, value, shown):
    """A field that is not text, or very long, still makes a short message of valid text."""
    fields = swf_line(1, 0, 5, 2).encode().split()
    fields[4] = value
    path = tmp_path / "t.swf"
    path.write_bytes(b" ".join(fields) + b"\n")
    with pytest.raises(TraceError) as e:
        read_swf(path)
    assert str(e.value) == f"{path}:1: field 5 (allocated procs) is not a number: {shown}"


def test_a_header_in_another_encoding_is_read(tmp_path):
    """Old logs may carry Latin-1 comments: the header is read as UTF-8 with replacements."""
    path = tmp_path / "t.swf"
    path.write_bytes(b"; Note: caf\xe9\n; MaxProcs: 8\n" + swf_line(1, 0, 5, 2).encode() + b"\n")
    log = parse_swf(path)
    assert log.header == [" Note: caf\ufffd", " MaxProcs: 8"]
    assert log.header_int("MaxProcs") == 8


def test_missing_file_and_machine_smaller_than_every_job(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_swf(tmp_path / "absent.swf")
    path = write(tmp_path, swf_line(1, 0, 5, 4) + "\n" + swf_line(2, 0, 5, 6))
    match = r"2 larger than the machine \(2 procs; the smallest needs 4\)"
    with pytest.raises(TraceError, match=match):
        read_swf(path, machine_procs=2)
