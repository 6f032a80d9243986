# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""write_files: only what differs is written, whole; check mode and bad input write nothing."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.files import describe_paths, write_files
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.manifests import run_manifests


def mode_of(path):
    return "%04o" % stat.S_IMODE(os.stat(path).st_mode)


def test_writes_missing_files_and_directories_then_nothing_on_a_second_run(tmp_path):
    files = [{"dest": str(tmp_path / "k8s" / "a.yaml"), "content": "a: 1\n"},
             {"dest": str(tmp_path / "bin" / "run.sh"), "content": "#!/bin/sh\n", "mode": "0755"}]
    first = write_files(files)
    assert [each["changed"] for each in first] == [True, True]
    assert (tmp_path / "k8s" / "a.yaml").read_text() == "a: 1\n"
    assert mode_of(tmp_path / "bin" / "run.sh") == "0755" and mode_of(tmp_path / "k8s" / "a.yaml") == "0644"
    assert [each["changed"] for each in write_files(files)] == [False, False]
    assert sorted(os.listdir(tmp_path / "k8s")) == ["a.yaml"]  # no temporary file left


def test_a_changed_mode_alone_is_a_change(tmp_path):
    path = tmp_path / "a.txt"
    write_files([{"dest": str(path), "content": "x"}])
    os.chmod(path, 0o600)
    assert write_files([{"dest": str(path), "content": "x"}])[0]["changed"]
    assert mode_of(path) == "0644"


def test_check_mode_reports_and_writes_nothing(tmp_path):
    result = write_files([{"dest": str(tmp_path / "d" / "a.txt"), "content": "x"}], check_mode=True)
    assert result[0]["changed"] and result[0]["diff"]["after"] == "x"
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("bad, field", [
    ({"mode": "rw-r--r--"}, "files[1].mode"),
    ({"mode": "99999"}, "files[1].mode"),
])
def test_bad_input_names_the_field_and_writes_nothing(tmp_path, bad, field):
    files = [{"dest": str(tmp_path / "first.txt"), "content": "1"}, dict({"dest": str(tmp_path / "second.txt"), "content": "2"}, **bad)]
    with pytest.raises(InputError) as error:
        write_files(files)
    assert error.value.path == field and "Fix:" in str(error.value)
    assert not list(tmp_path.iterdir())


def test_a_directory_as_destination_is_refused(tmp_path):
    with pytest.raises(InputError) as error:
        write_files([{"dest": str(tmp_path), "content": "x"}])
    assert error.value.path == "files[0].dest"


def test_describe_paths_lists_every_file_under_a_directory_and_says_what_is_missing(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "b.yaml").write_text("b")
    (tmp_path / "a.txt").write_text("a")
    os.symlink(tmp_path / "k8s", tmp_path / "link")
    found = describe_paths([str(tmp_path), str(tmp_path / "a.txt"), str(tmp_path / "missing")])
    assert found[0] == {"path": str(tmp_path), "exists": True, "isdir": True,
                        "files": [str(tmp_path / "a.txt"), str(tmp_path / "k8s" / "b.yaml")]}  # the link to a directory is not followed
    assert found[1] == {"path": str(tmp_path / "a.txt"), "exists": True, "isdir": False, "files": []}
    assert found[2] == {"path": str(tmp_path / "missing"), "exists": False, "isdir": False, "files": []}


@pytest.mark.parametrize("content, problem", [
    ("apiVersion: v1\nkind: Pod\nspec: [\n", "invalid YAML"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: x}\n", "metadata.name is missing"),
])
def test_manifests_refuse_a_bad_manifest_before_writing_any_file_or_calling_the_cluster(tmp_path, content, problem):
    params = {"manifests": [{"path": str(tmp_path / "good.yaml"), "content": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
                            {"path": str(tmp_path / "bad.yaml"), "content": content}],
              "kubeconfig": str(tmp_path / "no-such-kubeconfig")}  # reaching the cluster would fail differently
    result = run_manifests(params)
    assert result["failed"] and not result["changed"]
    assert result["msg"].startswith("manifests[1] (%s).content: manifest: " % (tmp_path / "bad.yaml"))
    assert problem in result["msg"]
    assert os.listdir(tmp_path) == []


def test_manifests_refuse_a_bad_mode_before_writing_anything(tmp_path):
    params = {"manifests": [{"path": str(tmp_path / "a.yaml"), "content": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
                            {"path": str(tmp_path / "b.yaml"), "content": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
                             "mode": "rw-r--r--"}],
              "kubeconfig": str(tmp_path / "no-such-kubeconfig")}
    result = run_manifests(params)
    assert result["failed"] and "manifests[1].mode" in result["msg"] and "octal" in result["msg"]
    assert os.listdir(tmp_path) == []


def test_manifests_apply_false_only_writes_the_file(tmp_path):
    # the kubeconfig does not exist: reaching the cluster would fail, so a success shows nothing was applied
    params = {"manifests": [{"path": str(tmp_path / "over.yaml"), "content": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
                             "apply": False}],
              "kubeconfig": str(tmp_path / "no-such-kubeconfig")}
    result = run_manifests(params)
    assert not result.get("failed"), result
    assert result["changed"] and result["manifests"][0]["objects"] == []
    assert (tmp_path / "over.yaml").read_text() == params["manifests"][0]["content"]
    assert not run_manifests(params)["changed"]


def test_manifests_apply_false_without_a_path_is_refused(tmp_path):
    result = run_manifests({"manifests": [{"content": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "apply": False}]})
    assert result["failed"] and result["msg"].startswith("manifests[0]: apply is false and no path is given")


def test_remove_paths_removes_files_links_and_directories_once_and_check_mode_removes_nothing(tmp_path):
    from ansible_collections.gpushare.k8s.plugins.module_utils.files import remove_paths

    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / "sub" / "f").write_text("x")
    (tmp_path / "file").write_text("y")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    paths = [str(tmp_path / name) for name in ("link", "dir", "file", "never")]
    planned = remove_paths(paths, check_mode=True)
    assert [each["changed"] for each in planned] == [True, True, True, False]
    assert sorted(os.listdir(tmp_path)) == ["dir", "file", "link"]
    assert [each["diff"]["before"] for each in planned] == ["file\n", "directory\n", "file\n", "absent\n"]
    assert [each["changed"] for each in remove_paths(paths)] == [True, True, True, False]
    assert os.listdir(tmp_path) == []
    assert not any(each["changed"] for each in remove_paths(paths))


@pytest.mark.parametrize("path", ["", "/"])
def test_remove_paths_refuses_an_empty_path_or_the_root_before_removing_anything(tmp_path, path):
    from ansible_collections.gpushare.k8s.plugins.module_utils.files import remove_paths

    (tmp_path / "file").write_text("y")
    with pytest.raises(InputError, match=r"absent\[1\]"):
        remove_paths([str(tmp_path / "file"), path])
    assert (tmp_path / "file").exists()
