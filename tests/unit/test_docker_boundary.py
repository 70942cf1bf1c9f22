"""One Docker boundary (issue 23): lab/docker.py is the only module of the lab that imports python-on-whales or
starts a `docker` process. Read from the source with `ast`, so a new module that reaches Docker another way fails
here, not in a lab test."""

from __future__ import annotations

import ast
from pathlib import Path

from lab import config

LAB = config.ROOT / "lab"
BOUNDARY = LAB / "docker.py"
#: Functions that start a process, as `module.function` (the program is their first argument, or its first item).
PROCESS_CALLS = frozenset({
    "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "subprocess.getoutput", "subprocess.getstatusoutput",
    "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
    "os.system", "os.popen", "os.execv", "os.execvp", "os.execvpe", "os.execl", "os.execlp", "os.spawnv",
    "os.spawnvp", "os.posix_spawn", "os.posix_spawnp",
})


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _names_docker(node: ast.expr | None, consts: dict[str, str], aliases: dict[str, str]) -> bool:
    """The program of a process call is docker: the string "docker" (or "docker ..." for a shell), a module-level
    name bound to one, lab.docker.PROGRAM, or a list or tuple whose first item is one of these."""
    if isinstance(node, ast.Name) and node.id in consts:
        node = ast.Constant(consts[node.id])
    if isinstance(node, (ast.Name, ast.Attribute)):
        head, _, rest = _dotted(node).partition(".")
        if f"{aliases.get(head, head)}{'.' + rest if rest else ''}" == "lab.docker.PROGRAM":
            return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        words = node.value.split()
        return bool(words) and Path(words[0]).name == "docker"
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        first = node.elts[0]
        return not isinstance(first, ast.Starred) and _names_docker(first, consts, aliases)
    return False


def violations(source: str, name: str) -> list[str]:
    """What in one module's source crosses the boundary, as "name:line: what"."""
    tree = ast.parse(source, filename=name)
    # `from subprocess import Popen` / `import subprocess as sp`: the local name -> what it is
    aliases: dict[str, str] = {}
    # module-level `NAME = "..."`: a program named once and used below
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "python_on_whales":
                    found.append(f"{name}:{node.lineno}: imports {a.name}")
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] == "python_on_whales":
                found.append(f"{name}:{node.lineno}: imports from {module}")
            for a in node.names:
                aliases[a.asname or a.name] = f"{module}.{a.name}"
        elif isinstance(node, ast.Call) and _dynamic_import_of_whales(node):
            found.append(f"{name}:{node.lineno}: imports python_on_whales dynamically")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func)
        head, _, rest = dotted.partition(".")
        full = f"{aliases.get(head, head)}{'.' + rest if rest else ''}"
        if full not in PROCESS_CALLS:
            continue
        program = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("args", "cmd",
                                                                                                    "program")), None)
        if _names_docker(program, consts, aliases):
            found.append(f"{name}:{node.lineno}: starts a docker process ({full})")
    return found


def _dynamic_import_of_whales(call: ast.Call) -> bool:
    """importlib.import_module("python_on_whales...") / __import__("python_on_whales...")."""
    if _dotted(call.func) not in ("importlib.import_module", "import_module", "__import__") or not call.args:
        return False
    arg = call.args[0]
    return isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("python_on_whales")


def test_only_lab_docker_reaches_docker():
    modules = sorted(p for p in LAB.rglob("*.py") if p != BOUNDARY)
    assert len(modules) > 50  # the scan sees the lab
    found = [v for p in modules for v in violations(p.read_text(), str(p.relative_to(config.ROOT)))]
    assert not found, "only lab/docker.py may import python_on_whales or start docker:\n" + "\n".join(found)


def test_the_boundary_itself_is_seen_to_reach_docker():
    """lab/docker.py does what the others must not: the scan finds it there (it is not blind)."""
    found = violations(BOUNDARY.read_text(), "lab/docker.py")
    assert any("imports" in v for v in found) and any("starts a docker process" in v for v in found)


def test_the_scan_fails_on_every_kind_of_violation():
    bad = {
        "import python_on_whales": "imports python_on_whales",
        "from python_on_whales.exceptions import DockerException": "imports from python_on_whales.exceptions",
        "import python_on_whales.utils as u": "imports python_on_whales.utils",
        "import importlib\nimportlib.import_module('python_on_whales')": "dynamically",
        "import subprocess\nsubprocess.run(['docker', 'ps'])": "(subprocess.run)",
        "import subprocess\nsubprocess.Popen(('docker', 'exec', '-i', 'c', 'sh'), stdin=subprocess.PIPE)":
            "(subprocess.Popen)",
        "import subprocess as sp\nsp.check_output(['/usr/bin/docker', 'version'])": "(subprocess.check_output)",
        "from subprocess import Popen\nPopen(['docker', 'start', '-a', 'x'])": "(subprocess.Popen)",
        "import subprocess\nsubprocess.run(args=['docker', 'ps'])": "(subprocess.run)",
        "import subprocess\nsubprocess.run('docker ps', shell=True)": "(subprocess.run)",
        "import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('docker', 'exec', 'c', 'ls')":
            "(asyncio.create_subprocess_exec)",
        "import os\nos.system('docker kill x')": "(os.system)",
        "import subprocess\nDOCKER = 'docker'\nsubprocess.run([DOCKER, 'ps'])": "(subprocess.run)",
        "import subprocess\nfrom lab import docker\nsubprocess.run([docker.PROGRAM, 'ps'])": "(subprocess.run)",
        "import subprocess\nfrom lab.docker import PROGRAM\nsubprocess.Popen([PROGRAM, 'ps'])": "(subprocess.Popen)",
    }
    for source, what in bad.items():
        found = violations(source, "m.py")
        assert len(found) == 1 and what in found[0], (source, found)


def test_the_scan_lets_the_rest_be():
    fine = [
        "from lab import docker\ndocker.exec_in('c', ['ls'])",
        "import subprocess\nsubprocess.run(['nsenter', '-t', '1', 'docker'])",  # docker is not the program
        "import subprocess\nsubprocess.run(['tc', 'qdisc'])",
        "out = {'docker': '27.0'}",
        "import subprocess\nsubprocess.run(argv)",  # a variable: built elsewhere (the scan of that module decides)
    ]
    for source in fine:
        assert violations(source, "m.py") == [], source
