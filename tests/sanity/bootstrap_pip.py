# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for ansible-test's pip bootstrap script, for machines that reach
package registries but not the site ansible-test downloads get-pip from.

ansible-test runs it as `python <script> [pip options] pip==X [--no-setuptools]
[--no-wheel]` inside a fresh venv: seed pip from the standard library's
ensurepip, then let that pip install the requested version from the registry.
"""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])
