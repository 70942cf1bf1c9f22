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

# run a sweep preset (loss, rtt, rate, ...), e.g. `just sweep loss --repeats 3`, `just sweep loss --parallel 3`
sweep name *args:
    uv run quiclab sweep "$@"

# run a finished sweep again from its manifest and judge whether the two agree: `just reproduce results/<folder>`
reproduce folder *args:
    uv run quiclab reproduce "$@"

# list the sweep presets
presets:
    uv run quiclab presets

# rebuild a sweep's summary, plots and report.html: `just report results/<folder>`
report folder:
    uv run quiclab report "$@"

# benchmark the link emulator (docs/benchmarks.md)
bench:
    uv run quiclab bench link

# the Grafana dashboards' URLs (or Prometheus' URL where Grafana is not available)
dashboard:
    uv run quiclab dashboard
