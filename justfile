# quiclab tasks (`just --list`). Everything goes through the `quiclab` CLI.

set positional-arguments

# set up everything (Docker, tools, images), bring the lab up and run the default job
setup:
    bash scripts/setup.sh

# the whole test suite
test *args:
    bash scripts/test.sh "$@"

up:
    uv run quiclab up

down:
    uv run quiclab down

status:
    uv run quiclab status

# one verified transfer per protocol, e.g. `just run --protocol h3 --size 10MB`
run *args:
    uv run quiclab run "$@"

# set the emulated link, e.g. `just shape --rtt 80ms --rate 10mbit --loss 1%`
shape *args:
    uv run quiclab shape "$@"
