# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""No filter file imports the Kubernetes client: the first gpushare.k8s filter of a task loads every filter file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
FILTERS = sorted(p.stem for p in (REPO / "plugins" / "filter").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", FILTERS)
def test_a_filter_file_does_not_import_kubernetes(name):
    code = ("import sys; import ansible_collections.gpushare.k8s.plugins.filter.%s; "
            "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))" % name)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(REPO / ".collections"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", "%s imports %s" % (name, proc.stdout.strip()[:200])


def test_the_controller_preloads_every_filter_file():
    from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import FILTER_FILES

    assert sorted(FILTER_FILES) == FILTERS
