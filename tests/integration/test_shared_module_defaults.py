# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One module_defaults block (group/gpushare.k8s.k8s, which extends kubernetes.core.k8s) configures both collections.

Against the live lab cluster: the block sets kubernetes.core auth options this collection used not to
take (no_proxy, persist_config, proxy_headers: "Unsupported parameters" before), then impersonation,
which both collections must honour (the API server names the impersonated user when it refuses).
"""
from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_one_block_configures_both_collections(run_playbook, kubeconfig):
    context = yaml.safe_load(Path(kubeconfig).read_text())["current-context"]
    proc = run_playbook(REPO / "tests" / "integration" / "playbooks" / "shared_module_defaults.yml",
                        extra_vars={"it_kubeconfig": kubeconfig, "it_context": context}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "Unsupported parameters" not in proc.stdout
    assert "ok=6" in proc.stdout and "failed=0" in proc.stdout and "ignored=2" in proc.stdout, proc.stdout[-2000:]
