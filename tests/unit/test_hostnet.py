import pytest

from lab import hostnet
from lab.hostnet import LAB_BRIDGES, rule_args
from lab.instance import Instance
from tests.compose import rendered

HOSTNET_SH = hostnet.config.ROOT / "images" / "hostnet" / "hostnet.sh"


def test_rule_only_accepts_traffic_staying_on_one_lab_bridge():
    for b in LAB_BRIDGES:
        args = rule_args(b)
        assert args[0] == "DOCKER-USER"
        assert args[args.index("-i") + 1] == b and args[args.index("-o") + 1] == b
        assert args[-2:] == ["-j", "ACCEPT"]


def test_bridges_match_the_compose_file():
    for number in range(10):
        lab = Instance(number)
        text = rendered(lab)
        for net in ("client", "server"):
            assert f'com.docker.network.bridge.name: "{lab.bridge(net)}"' in text
        # the compose service that holds the rules names the same bridges
        assert f"QUICLAB_BRIDGES: {lab.bridge('client')} {lab.bridge('server')}\n" in text
    assert LAB_BRIDGES == ("ql-client", "ql-server")  # the default lab (no QUICLAB_INSTANCE in the test run)


def test_the_compose_service_adds_the_rule_quiclab_adds():
    """quiclab up/down and the `hostnet` service recognise each other's rules: the same match and comment."""
    script = HOSTNET_SH.read_text()
    assert f'comment="{hostnet.COMMENT}"' in script
    assert ('"$1" DOCKER-USER -i "$2" -o "$2" -m comment --comment "$comment" -j ACCEPT' in script)
    assert rule_args("B") == ["DOCKER-USER", "-i", "B", "-o", "B", "-m", "comment", "--comment", hostnet.COMMENT,
                              "-j", "ACCEPT"]


@pytest.mark.parametrize(("rule", "bridges", "ours"), [
    ('-A DOCKER-USER -i ql-client -o ql-client -m comment --comment "quiclab lab bridge" -j ACCEPT',
     ("ql-client", "ql-server"), True),
    ('-A DOCKER-USER -i ql1-client -o ql1-client -m comment --comment "quiclab lab bridge" -j ACCEPT',
     ("ql-client", "ql-server"), False),  # another lab's
    ("-A DOCKER-USER -i ql-client -o ql-client -j ACCEPT", ("ql-client",), False),  # the host's own rule
    ("-A DOCKER-USER -j RETURN", ("ql-client",), False),
])
def test_only_this_labs_rules_are_its_own(monkeypatch, rule, bridges, ours):
    class Done:
        returncode = 0
        stdout = f"-N DOCKER-USER\n{rule}\n"

    monkeypatch.setattr(hostnet, "_iptables", lambda: "iptables")
    monkeypatch.setattr(hostnet.subprocess, "run", lambda *a, **k: Done())
    assert hostnet.lab_rules(bridges) == ([rule] if ours else [])
