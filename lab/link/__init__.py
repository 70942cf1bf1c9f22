"""The emulated link: one parameter model (model.py), parsed from key=value specs (spec.py), applied by one of
two backends with identical semantics (linkem.py: our userspace emulator; netem.py: tc netem)."""
