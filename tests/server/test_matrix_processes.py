"""The switching matrix across processes: a framework per process, all at once, against one server (the
first registered frameworks, one per fact of ``FACTS``; ``PORTAMEM_SWITCHING_FRAMEWORKS`` chooses others).

Process i writes a fact through framework i while the others run; each then recalls, through its
own framework, the fact the previous process wrote through another one, unchanged and ranked first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from portamem_conformance import BUILTIN_DRIVERS, FACTS
from portamem_conformance.switching import matrix_frameworks
from portamem_conformance.remote import BASE_ENV, KEYS_ENV, URL_ENV, ServerProcess


def test_four_frameworks_in_four_processes_share_one_memory(server: ServerProcess, tmp_path: Path) -> None:
    names = matrix_frameworks()[: len(FACTS)]  # one fact each: a registry longer than FACTS ran out of facts
    facts = list(FACTS)[: len(names)]
    env = {**os.environ, URL_ENV: server.url, KEYS_ENV: server.db_url}
    env.pop(BASE_ENV, None)
    children = []
    for i, name in enumerate(names):
        previous = facts[i - 1]
        job = {"base": BUILTIN_DRIVERS[name], "path": str(tmp_path / "shared"),
               "scope": {"user_id": "alice", "session_id": name, "tenant_id": "acme"},
               "remember": [facts[i]], "expect": facts, "query": FACTS[previous], "timeout": 240}
        (tmp_path / f"{name}.job").write_text(json.dumps(job))
        with open(tmp_path / f"{name}.job") as stdin, open(tmp_path / f"{name}.out", "w") as stdout, \
                open(tmp_path / f"{name}.err", "w") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "portamem_conformance.remote"], stdin=stdin,
                                    stdout=stdout, stderr=stderr, text=True, env=env)
        children.append((name, previous, proc))
    for name, previous, proc in children:
        proc.wait(timeout=300)
        out, err = (tmp_path / f"{name}.out").read_text(), (tmp_path / f"{name}.err").read_text()
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        result = json.loads(out.strip().splitlines()[-1])
        assert result == {"adapter": name, "recall": [previous]}, name
