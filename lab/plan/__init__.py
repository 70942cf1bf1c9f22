"""What to run: scenarios, their validation and plans, shards, presets, and whether a run can run here."""
