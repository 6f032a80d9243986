# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""write_files: only what differs is written, whole; check mode and bad input write nothing."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab_files import write_files


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
