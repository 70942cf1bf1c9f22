from lab.hostnet import LAB_BRIDGES, rule_args


def test_rule_only_accepts_traffic_staying_on_one_lab_bridge():
    for b in LAB_BRIDGES:
        args = rule_args(b)
        assert args[0] == "DOCKER-USER"
        assert args[args.index("-i") + 1] == b and args[args.index("-o") + 1] == b
        assert args[-2:] == ["-j", "ACCEPT"]


def test_bridges_match_the_compose_file():
    from lab.config import COMPOSE_FILE
    text = COMPOSE_FILE.read_text()
    for b in LAB_BRIDGES:
        assert f"com.docker.network.bridge.name: {b}" in text
