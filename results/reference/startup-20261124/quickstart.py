"""Fixed cost before a sweep's first run: wall clock from launching `quiclab sweep` to the first run's started_at."""
import csv, datetime as dt, json, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    before = set(out.iterdir())
    t = dt.datetime.now(dt.UTC)
    subprocess.run([sys.executable, "-m", "lab", "sweep", "quick", "--out", str(out)], capture_output=True, check=True,
                   env={**__import__("os").environ, "QUICLAB_PUSHGATEWAY_URL": "off"})
    (folder,) = set(out.iterdir()) - before
    runs = list(csv.DictReader(open(folder / "runs.csv")))
    first = min(dt.datetime.fromisoformat(r["started_at"]) for r in runs)
    m = json.load(open(folder / "manifest.json"))
    print(f"sweep {i + 1}: first run {(first - t).total_seconds():.2f} s after launch; startup cache reused: "
          f"{m['startup_cache']['reused']}")
