# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One error root for bad input: every ValueError a module_utils file defines is an InputError, so every catch of
InputError (the filters', the modules', the role argument check's) turns any of them into the same
"<field>: <problem>. Fix: <fix>" message."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from ansible_collections.gpushare.k8s.plugins import module_utils
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError


def test_every_bad_input_error_is_an_input_error():
    found = {}
    for info in pkgutil.iter_modules(module_utils.__path__):
        module = importlib.import_module("%s.%s" % (module_utils.__name__, info.name))
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, ValueError):
                found["%s.%s" % (info.name, name)] = issubclass(cls, InputError)
    assert {"device_plugin.ConfigError", "lab_preflight.PreflightError", "mig.MigError"} <= set(found)
    assert [name for name, ok in sorted(found.items()) if not ok] == []


def test_a_config_error_keeps_its_config_name_in_front():
    from ansible_collections.gpushare.k8s.plugins.module_utils.device_plugin import ConfigError

    error = ConfigError("sharing.timeSlicing", "must be a mapping", "write it as a mapping", config_name="shared")
    assert str(error) == "shared: sharing.timeSlicing: must be a mapping. Fix: write it as a mapping"
    assert (error.path, error.problem, error.fix, error.config_name) == ("sharing.timeSlicing", "must be a mapping", "write it as a mapping", "shared")
