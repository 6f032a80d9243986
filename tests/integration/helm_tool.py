# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pinned helm binary of the live tests: tools/helm/build.sh builds it once into the user's cache."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tools" / "helm" / "build.sh"


def helm_binary(timeout: float = 1800) -> Path:
    """The path of the helm that tools/helm/go.mod pins, built on first use (minutes; cached afterwards).

    build.sh's progress lines go to this process's stderr as they come; its stdout is the path.
    """
    proc = subprocess.run([str(BUILD)], cwd=REPO, stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{BUILD} exited {proc.returncode} (its output above, Go's in its log under the cache's logs/)")
    path = Path(proc.stdout.strip().splitlines()[-1])
    if not path.is_file():
        raise RuntimeError(f"{BUILD} printed {proc.stdout.strip()!r}, not the path of a helm binary")
    return path
