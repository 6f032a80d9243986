# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A module's main() run in the controller returns what the same main() returns under ansible-core's AnsibleModule.

Each case runs the module twice with the same arguments: once under the real AnsibleModule (its exit and fail
caught), once through run_in_process (the action plugins' path), and compares the results.
"""

from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import import_module_file, run_in_process


class _Exit(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result


def under_ansible_module(monkeypatch, module_file, args, check_mode=False, diff=False):
    def exit_json(self, **result):
        raise _Exit(result)

    def fail_json(self, msg, **result):
        raise _Exit(dict(result, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    internal = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(internal):
        with pytest.raises(_Exit) as done:
            module_file.main()
    result = done.value.result
    result.pop("invocation", None)
    if "msg" in result:  # outside an AnsiballZ run AnsibleModule names itself after its own file
        result["msg"] = result["msg"].replace("(basic.py)", "(%s)" % module_file.__name__.rsplit(".", 1)[-1])
    return result


def both(monkeypatch, name, args, **modes):
    module_file = import_module_file(name)
    return under_ansible_module(monkeypatch, module_file, args, **modes), run_in_process(module_file, args, **modes)


def test_files_writes_and_reports_the_same(monkeypatch, tmp_path):
    args = {"files": [{"dest": str(tmp_path / "a" / "one.txt"), "content": "one\n"}]}
    module_result = under_ansible_module(monkeypatch, import_module_file("files"), args, diff=True)
    (tmp_path / "a" / "one.txt").unlink()
    controller_result = run_in_process(import_module_file("files"), args, diff=True)
    assert controller_result == module_result
    assert controller_result["changed"] and (tmp_path / "a" / "one.txt").read_text() == "one\n"
    assert controller_result["diff"][0]["after"] == "one\n"


@pytest.mark.parametrize("args, expected", [
    ({}, "one of the following is required: files, absent"),
    ({"files": [{"dest": "/tmp/x"}]}, "missing required arguments: content found in files"),
    ({"files": [], "colour": "red"}, "Unsupported parameters for (files) module: colour"),
])
def test_bad_arguments_fail_with_ansible_modules_message(monkeypatch, args, expected):
    module_result, controller_result = both(monkeypatch, "files", args)
    assert controller_result == module_result
    assert controller_result["failed"] and controller_result["msg"].startswith(expected), controller_result


def test_a_bad_path_to_remove_writes_no_file_and_removes_nothing(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("kept\n")
    args = {"files": [{"dest": str(tmp_path / "new.txt"), "content": "new\n"}], "absent": [str(keep), ""]}
    result = run_in_process(import_module_file("files"), args)
    assert result["failed"] and result["msg"].startswith("absent[1]: "), result
    assert keep.read_text() == "kept\n" and not (tmp_path / "new.txt").exists()


def test_check_mode_writes_nothing_on_either_path(monkeypatch, tmp_path):
    args = {"files": [{"dest": str(tmp_path / "two.txt"), "content": "two\n"}]}
    module_result, controller_result = both(monkeypatch, "files", args, check_mode=True)
    assert controller_result == module_result
    assert controller_result["changed"] and not (tmp_path / "two.txt").exists()


def test_a_missing_kubeconfig_is_the_same_message(monkeypatch, tmp_path):
    args = {"kubeconfig": str(tmp_path / "nope.yaml")}
    module_result, controller_result = both(monkeypatch, "api_server_check", args)
    assert controller_result == module_result
    assert controller_result["failed"] and "nope.yaml does not exist" in controller_result["msg"], controller_result


def test_credentials_of_a_kubeconfig_dict_are_masked_in_the_controller_too(tmp_path):
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "s3cr3t-token-value"}}],
    }
    args = {"kubeconfig": kubeconfig, "request_timeout": 1, "fix": "token s3cr3t-token-value"}
    result = run_in_process(import_module_file("api_server_check"), args)
    assert result["failed"]
    assert "s3cr3t-token-value" not in repr(result), result


def test_no_log_values_the_validator_finds_are_masked_in_the_controller():
    """The controller takes the no_log values from ansible-core's own validator (ValidationResult._no_log_values, a
    private attribute: `make matrix` runs this on every ansible-core meta/runtime.yml claims), its own and the
    suboptions' and fallbacks', and masks them as a module process does."""
    from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import ModuleDone, bound_module

    spec = {"password": {"type": "str", "no_log": True},
            "auth": {"type": "dict", "options": {"token": {"type": "str", "no_log": True}}},
            "key": {"type": "str", "no_log": True, "fallback": (lambda: "env-k3y-value",)}}
    module = bound_module({"password": "hunter2-secret", "auth": {"token": "t0ken-value"}}, False, False, "probe")(argument_spec=spec)
    assert module.params["key"] == "env-k3y-value"
    with pytest.raises(ModuleDone) as done:
        module.exit_json(changed=False, msg="password hunter2-secret, token t0ken-value, key env-k3y-value")
    assert done.value.result["msg"] == "password ********, token ********, key ********", done.value.result


def test_an_exit_inside_the_modules_own_except_exception_still_ends_the_run():
    from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import bound_module

    module = bound_module({}, False, False, "probe")(argument_spec={})
    caught = None
    try:
        module.exit_json(changed=False, answer=42)
    except Exception:  # pylint: disable=broad-except
        raise AssertionError("exit_json was caught as an Exception, as gpu_operator_wait's handler would")
    except BaseException as done:  # pylint: disable=broad-except
        caught = done
    assert caught is not None, "exit_json returned instead of ending the run"
    assert caught.result == {"changed": False, "answer": 42}


def test_arguments_reach_the_module_as_the_plain_types_a_module_process_gets(tmp_path):
    """ansible-core's tagged str (a subclass) is refused by PyYAML's safe_dump; the module must get a plain str."""
    import yaml

    from ansible.module_utils._internal._datatag import AnsibleTagHelper
    from ansible._internal._datatag._tags import Origin

    from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import plain

    origin = Origin(path="/inventory/group_vars/all/lab.yml", line_num=1)
    tagged = {AnsibleTagHelper.tag("key", origin): AnsibleTagHelper.tag("gpushare", origin)}
    assert next(iter(tagged.values())).__class__ is not str  # the precondition: a tagged value is a str subclass
    with pytest.raises(yaml.representer.RepresenterError):
        yaml.safe_dump(tagged)
    converted = plain(tagged)
    assert yaml.safe_dump(converted) == "key: gpushare\n"
    assert all(each.__class__ is str for each in list(converted) + list(converted.values()))


def test_command_check_expecting_a_non_zero_exit_says_it_did_not_fail(monkeypatch, tmp_path):
    # ansible-core takes a result with a non-zero rc and no "failed" key for a failure: the module says failed=False.
    script = tmp_path / "over.sh"
    script.write_text("#!/bin/sh\necho OVER=trainer=2\nexit 1\n")
    script.chmod(0o755)
    module_result, controller_result = both(monkeypatch, "command_check", {"argv": [str(script)], "expect_rc": 1})
    assert controller_result == module_result
    assert controller_result["failed"] is False and controller_result["rc"] == 1, controller_result
