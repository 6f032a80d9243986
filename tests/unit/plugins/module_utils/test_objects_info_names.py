# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""objects_info's ``names``: validated as the module validates it (the live result is in test_controller_actions)."""

from __future__ import annotations

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import (
    OBJECTS_INFO_ARG_SPEC,
    OBJECTS_INFO_MUTUALLY_EXCLUSIVE,
    OBJECTS_INFO_REQUIRED_ONE_OF,
)

VALIDATOR = ArgumentSpecValidator(OBJECTS_INFO_ARG_SPEC, mutually_exclusive=OBJECTS_INFO_MUTUALLY_EXCLUSIVE,
                                  required_one_of=OBJECTS_INFO_REQUIRED_ONE_OF)


def test_names_with_a_kind_are_accepted_as_a_list_of_strings():
    result = VALIDATOR.validate({"kind": "Pod", "namespace": "gpu-share", "names": ["a", 2]})
    assert not result.error_messages
    assert result.validated_parameters["names"] == ["a", "2"]


@pytest.mark.parametrize("other, message", [
    ({"kind": "Pod", "name": "a"}, "name|names"),
    ({"queries": [{"kind": "Pod"}]}, "names|queries"),
])
def test_names_exclude_name_and_queries(other, message):
    result = VALIDATOR.validate(dict(other, names=["a"]))
    assert any("mutually exclusive" in each and message in each for each in result.error_messages), result.error_messages


def test_names_alone_still_need_a_kind():
    result = VALIDATOR.validate({"names": ["a"]})
    assert any("one of the following is required: kind, queries" in each for each in result.error_messages), result.error_messages
