# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One error root: every error a module_utils file defines derives from errors.GpushareError (a caller tells the
collection's own failures from a bug with one except clause), and every ValueError among them is an InputError, so
every catch of InputError (the filters', the modules', the role argument check's) turns any of them into the same
"<field>: <problem>. Fix: <fix>" message."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from ansible_collections.gpushare.k8s.plugins import module_utils
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import ApiCallError, GpushareError, InputError

# manifest_yaml also runs alone inside the installed bin/check-request.sh (nothing else of the collection is there):
# its error cannot import the root.
STANDALONE = {"k8s.manifest_yaml.ManifestError"}


def defined_errors():
    """Every exception class a module_utils file defines, by "<package>.<file>.<class>", except private control flow
    (``_Exit``)."""
    found = {}
    prefix = module_utils.__name__ + "."
    for info in pkgutil.walk_packages(module_utils.__path__, prefix):
        if info.ispkg:
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException) and not name.startswith("_"):
                found["%s.%s" % (info.name[len(prefix):], name)] = cls
    return found


def test_every_bad_input_error_is_an_input_error():
    found = {name: issubclass(cls, InputError) for name, cls in defined_errors().items() if issubclass(cls, ValueError)}
    assert {"nvidia.device_plugin.ConfigError", "lab.cluster_preflight.PreflightError", "hardware.mig.MigError"} <= set(found)
    assert [name for name, ok in sorted(found.items()) if not ok] == []


def test_every_error_of_the_collection_has_one_root():
    errors = defined_errors()
    assert {"k8s.auth.K8sAuthError", "lab.kwok_cluster.KwokctlError", "lab.node_status.NodeWriteError", "k8s.cluster_objects.ClusterReadError",
            "errors.ApiCallError", "errors.InputError"} <= set(errors)
    assert [name for name, cls in sorted(errors.items()) if not issubclass(cls, GpushareError)] == sorted(STANDALONE)
    # the root changes no catch that already works: bad input is still a ValueError, an API error is not
    assert issubclass(InputError, ValueError) and not issubclass(ApiCallError, ValueError)


def test_a_config_error_keeps_its_config_name_in_front():
    from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import ConfigError

    error = ConfigError("sharing.timeSlicing", "must be a mapping", "write it as a mapping", config_name="shared")
    assert str(error) == "shared: sharing.timeSlicing: must be a mapping. Fix: write it as a mapping"
    assert (error.path, error.problem, error.fix, error.config_name) == ("sharing.timeSlicing", "must be a mapping", "write it as a mapping", "shared")
