"""The generated docs (`quiclab docs`): which blocks of which docs are generated (generated.py), the blocks
(blocks.py), the seed atlas docs/seeds.md (atlas.py) and the paired rule's table (pairing_table.py)."""
