"""The sweep folder format, and nothing made from it: the run record (schema.py, runs.csv's row), the manifest and
the folder's files (folder.py), the one writer and reader of runs.csv and the manifest (store.py), objects.csv
(objects_csv.py), and what a reference folder keeps (publish.py). Statistics are lab/stats/, reports lab/report/,
the generated docs lab/docgen/."""
