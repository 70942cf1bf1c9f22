import os
import time

from lab.lines import LineReader


def test_lines_split_across_reads_and_several_in_one_read_come_out_whole():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf, os.fdopen(w, "wb", buffering=0) as wf:
        lines = LineReader(rf)
        wf.write(b'{"a": 1}\n{"b"')
        assert lines.read_line(time.monotonic() + 1) == '{"a": 1}'
        assert lines.read_line(time.monotonic() + 0.05) is None  # half a line: the deadline passes
        wf.write(b': 2}\nthird\n')
        assert lines.read_line(time.monotonic() + 1) == '{"b": 2}'
        assert lines.read_line(time.monotonic() + 1) == "third"
        wf.close()
        assert lines.read_line(time.monotonic() + 1) is None  # ended


def test_an_undecodable_byte_does_not_raise():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf, os.fdopen(w, "wb", buffering=0) as wf:
        wf.write(b"caf\xe9\n")
        assert LineReader(rf).read_line(time.monotonic() + 1) == "caf\ufffd"
