# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request check reads DRA claims: requests of a shared device class counted in shares, one code path for the
module, the script and the filter."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.check_request import main
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import ManifestError, check_claim_limits, find_offenders

SHARED = "shared.gpu.nvidia.com"
LIMITS = {SHARED: {"memory": "20Gi"}}


def claim(name, *requests, template=False):
    spec = {"devices": {"requests": list(requests)}}
    if template:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name}, "spec": {"spec": spec}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec}


def exactly(name, device_class=SHARED, **fields):
    return {"name": name, "exactly": dict({"deviceClassName": device_class}, **fields)}


@pytest.mark.parametrize("request_, shares", [
    (exactly("share"), 1),
    (exactly("share", capacity={"requests": {"memory": "20Gi"}}), 1),
    (exactly("share", capacity={"requests": {"memory": "10Gi"}}), 1),  # the policy rounds it up to one share
    (exactly("share", capacity={"requests": {"memory": "40Gi"}}), 2),
    (exactly("share", capacity={"requests": {"memory": "20481Mi"}}), 2),
    (exactly("share", count=3), 3),
    (exactly("share", count=2, capacity={"requests": {"memory": "40Gi"}}), 4),
    (exactly("share", allocationMode="All"), "all"),
])
def test_a_shared_class_request_is_counted_in_shares(request_, shares):
    found = find_offenders([claim("c", request_)], claim_limits=LIMITS, max_per_container=0)
    assert found == [{"document": 0, "kind": "ResourceClaim", "name": "c", "container": "c/share", "resource": SHARED, "count": shares}]


def test_more_than_one_share_is_reported_like_two_slices():
    docs = [
        claim("ok", exactly("share")),
        claim("two", exactly("share", capacity={"requests": {"memory": "40Gi"}})),
        claim("fallback", {"name": "gpu", "firstAvailable": [
            {"name": "mig", "deviceClassName": "mig.nvidia.com", "count": 5},
            {"name": "shared", "deviceClassName": SHARED, "count": 2}]}, template=True),
        claim("whole", exactly("gpu", "gpu.nvidia.com", count=2)),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}},
    ]
    assert [(o["container"], o["count"]) for o in find_offenders(docs, claim_limits=LIMITS)] == [
        ("two/share", 2), ("fallback/gpu/shared", 2), ("c", 2)]
    # Without claim limits claims are not read at all (the lab's step 6 as written).
    assert [(o["container"], o["count"]) for o in find_offenders(docs)] == [("c", 2)]


def test_claims_in_yaml_text_and_lists_are_read_as_kubectl_reads_them():
    text = yaml.safe_dump_all([{"apiVersion": "v1", "kind": "List", "items": [
        claim("two", exactly("share", capacity={"requests": {"memory": "40Gi"}}))]}])
    assert find_offenders(text, claim_limits=LIMITS)[0]["container"] == "two/share"
    with pytest.raises(ManifestError, match="count is 'many'"):
        find_offenders(yaml.safe_dump(claim("bad", exactly("share", count="many"))), claim_limits=LIMITS)
    with pytest.raises(ManifestError, match="requests must be a list"):
        find_offenders([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "x"},
                         "spec": {"devices": {"requests": {"name": "x"}}}}], claim_limits=LIMITS)


@pytest.mark.parametrize("limits, message", [
    ("x", "claim_limits must map a device class"),
    ({SHARED: {"memory": "lots"}}, "claim_limits[shared.gpu.nvidia.com][memory]: 'lots'"),
    ({SHARED: {"memory": "0"}}, "zero, not a limit"),
    ({SHARED: ["memory"]}, "must map a capacity name to a quantity"),
])
def test_bad_claim_limits(limits, message):
    with pytest.raises(ValueError, match=message.replace("[", "\\[").replace("]", "\\]")):
        check_claim_limits(limits)


def test_the_lab_limit_comes_from_the_shared_node():
    nodes = dra.normalize_nodes([{"name": "s", "gpus": 2, "shared": {"replicas": 4}}, {"name": "w", "gpus": 1}], "NVIDIA-A100-SXM4-80GB")
    assert dra.share_limits(nodes) == LIMITS
    assert check_claim_limits(dra.share_limits(nodes)) == {SHARED: {"memory": 20 * 2 ** 30}}


def test_the_command_line_takes_claim_limits(tmp_path, capsys):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump_all([claim("two", exactly("share", capacity={"requests": {"memory": "40Gi"}})),
                                        claim("one", exactly("share"))]))
    assert main([str(path), "--claim-limit", SHARED + ":memory=20Gi"]) == 1
    assert capsys.readouterr().out == "OVER=two/share=2\n"
    assert main([str(path), "--claim-limit", SHARED]) == 0  # counted in devices only: one device each
    assert capsys.readouterr().out == "OK\n"
    assert main([str(path)]) == 0
    assert main([str(path), "--claim-limit", SHARED + ":memory"]) == 2
    assert "write CLASS or CLASS:CAPACITY=QUANTITY" in capsys.readouterr().err
