"""`quiclab probe` and `quiclab calibrate` through the real CLI (lab.cli.main in this process, as the entry point
calls it; one case as `python -m lab` in a subprocess with the Docker engine unreachable: neither command needs the
lab): bad measurement input exits 2 with one line naming the file and what is missing, no traceback; good input
goes from files to a scenario file the sweep's loader accepts."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main
from lab.plan.checks import load
from tests import calibrate_inputs as inputs
from tests import pathsim

NO_DOCKER = "unix:///nonexistent/quiclab-tests-docker.sock"


def quiclab(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUICLAB_")}
    env.update(HOME=str(where), DOCKER_HOST=NO_DOCKER, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _small_connection() -> bytes:
    """A capture holding only a short TCP exchange (a handshake and 20 kB): no bulk download."""
    records = pathsim.download(pathsim.Path(4e6, 0.04, 27), 0.0)
    return pathsim.capture(records)


def _flent_of_another_test() -> bytes:
    data = json.loads(gzip.decompress(inputs.flent_gz("tcp_download", 20, 60, 10)))
    data["metadata"]["NAME"] = "udp_flood"
    return gzip.compress(json.dumps(data).encode())


#: (case, file name, content, what the one line must say besides the file's name)
BAD: list[tuple[str, str, bytes | str, str]] = [
    ("empty-file", "empty.pcap", b"", "empty file"),
    ("empty-pcap", "empty.pcap", pathsim.empty_capture(), "a capture without packets"),
    ("no-download", "small.pcap", _small_connection(), "no TCP download in it"),
    ("failed-iperf3", "iperf3.json", inputs.iperf3_failed(), "a failed iperf3 run"),
    ("other-flent", "flood.flent.gz", _flent_of_another_test(), "a flent 'udp_flood' test"),
    ("backwards-trace", "cell.down", "10\n20\n15\n30\n", "entry 3 (15 after 20): timestamps must be >= 0 and never "
                                                         "decrease"),
    ("no-replies", "ping.txt", "PING 192.0.2.1 56(84) bytes of data.\nRequest timeout for icmp_seq 0\n",
     "no ping replies"),
]


def in_process(where: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
               ) -> subprocess.CompletedProcess[str]:
    """The command as the entry point runs it (errors to one line and an exit code), in this process."""
    monkeypatch.chdir(where)
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_measurement_input_exits_2_naming_the_file(case, tmp_path, monkeypatch, capsys):
    _, file, content, what = case
    (tmp_path / file).write_bytes(content if isinstance(content, bytes) else content.encode())
    r = in_process(tmp_path, monkeypatch, capsys, "probe", file, "--out", "folder")
    shown = f"exit {r.returncode}\nstderr:\n{r.stderr}\nstdout:\n{r.stdout}"
    assert r.returncode == 2, shown
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and file in lines[0] and what in lines[0], shown
    assert not (tmp_path / "folder").exists()  # nothing is written from bad input


def test_the_entry_point_prints_no_traceback(tmp_path):
    (tmp_path / "empty.pcap").write_bytes(pathsim.empty_capture())
    r = quiclab(tmp_path, "probe", "empty.pcap", "--out", "m")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "error: empty.pcap: a capture without packets: no download in it"


def test_calibrate_refuses_a_folder_without_measurements(tmp_path, monkeypatch, capsys):
    (tmp_path / "nothing").mkdir()
    r = in_process(tmp_path, monkeypatch, capsys, "calibrate", "nothing", "--out", "link.toml")
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: 'nothing' is not a measurement folder: no measurements.json (make one with "
                                "quiclab probe)")


def test_from_a_capture_and_pings_to_a_scenario_the_sweep_accepts(tmp_path, monkeypatch, capsys):
    (tmp_path / "d.pcap").write_bytes(pathsim.capture(pathsim.download(pathsim.Path(4e6, 0.04, 27), 6)))
    (tmp_path / "ping.txt").write_text(inputs.ping_text(inputs.uniform_rtts(40, 1, 50)))
    r = in_process(tmp_path, monkeypatch, capsys, "probe", "d.pcap", "ping.txt", "--out", "m")
    assert r.returncode == 0, r.stderr
    assert "can tell the queue size" in r.stderr and "cannot tell the uplink's rate" in r.stderr
    again = in_process(tmp_path, monkeypatch, capsys, "probe", "d.pcap", "--out", "m")
    assert again.returncode == 2 and "already a measurement folder" in again.stderr
    r = in_process(tmp_path, monkeypatch, capsys, "calibrate", "m", "--out", "link.toml")
    assert r.returncode == 0, r.stderr
    assert "first estimates" in r.stdout and "not yet searched in the lab" in r.stderr
    s = load(tmp_path / "link.toml")
    assert s.link["rtt"].endswith("ms") and s.link["jitter"].endswith("ms")
    assert set(s.link["down"]) == {"rate", "queue"}
    assert json.loads((tmp_path / "m" / "estimate.json").read_text())["down_queue_bytes"] > 0


def test_search_with_one_sender_exits_2_before_the_lab_is_touched(tmp_path):
    """In a subprocess with the Docker engine unreachable: the refusal comes before any lab command."""
    (tmp_path / "cubic.json").write_text(inputs.iperf3_json("cubic", [5.0] * 10, rtts_ms=[30.0] * 10, reverse=True))
    (tmp_path / "ping.txt").write_text(inputs.ping_text([20.0] * 20))
    assert quiclab(tmp_path, "probe", "cubic.json", "ping.txt", "--out", "m").returncode == 0
    r = quiclab(tmp_path, "calibrate", "m", "--out", "link.toml", "--search")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("error: m: the lab search needs 2 or more measured senders")
    assert not (tmp_path / "link.toml").exists() and not (tmp_path / "m" / "fit.json").exists()
