# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state file of our mock NVML (nvml_state.py): every fact from NVIDIA's tables, a format the C library reads.

tests/integration/test_nvidia_gfd.py runs NVIDIA's gpu-feature-discovery over the library with these files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import products as gpu_products
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import tables as gpu_tables
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError

ROOT = Path(__file__).resolve().parents[4]
MOCK_SOURCE = ROOT / "tools" / "nvml-mock" / "nvml_mock.c"


@pytest.mark.parametrize("product", sorted(gpu_tables.PRODUCTS))
def test_every_device_field_comes_from_the_tables(product):
    facts = gpu_tables.PRODUCTS[product]
    state = dict(nvml_state.node_state("NVIDIA-" + product, 2, node="n1"))
    assert state["device_count"] == "2"
    for index in range(2):
        device = {key.split(".", 2)[2]: value for key, value in state.items() if key.startswith("device.%d." % index)}
        assert [key for key in device if key.split(".")[0] not in nvml_state.DEVICE_TABLES] == list(nvml_state.DEVICE_FIELDS)
        assert device["name"] == facts["name"]
        assert device["memory_mib"] == str(facts["memory_mib"])
        assert device["cuda_compute_capability"] == facts["cuda_compute_capability"].replace(".", " ")
        assert device["pci_device_id"] == facts["pci_device_id"]
        assert device["architecture"] == str(nvml_state.ARCHITECTURES[facts["architecture"]])
        assert device["brand"] == str(nvml_state.BRANDS[facts["brand"]])
        assert device["mig_mode"] == ("0" if facts["mig_profiles"] else "none")
        assert device["minor"] == str(index)
        assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", device["uuid"])
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:00\.0", device["pci_bus_id"])


def test_the_versions_are_those_of_the_mocks_server_of_the_product():
    state = dict(nvml_state.node_state("H200", 1))
    server = gpu_tables.SERVERS["dgxh200"]
    assert (state["driver_version"], state["nvml_version"], state["cuda_driver_version"]) == (
        server["driver_version"], server["nvml_version"], str(server["cuda_driver_version"]))
    # a product no DGX server of the mock has: the DGX A100's driver
    other = dict(nvml_state.node_state("A30-PCIE-24GB", 1))
    assert other["driver_version"] == gpu_tables.SERVERS["dgxa100"]["driver_version"]


def test_aliases_and_case_name_the_same_gpu():
    assert nvml_state.node_state("h100-sxm5-80gb", 1, node="x") == nvml_state.node_state("NVIDIA-H100-80GB-HBM3", 1, node="x")


def test_uuids_are_stable_per_node_and_distinct_across_nodes_and_gpus():
    def uuids(node):
        return [value for key, value in nvml_state.node_state("A100-SXM4-80GB", 3, node=node) if key.endswith(".uuid")]

    assert uuids("a") == uuids("a")
    assert len(set(uuids("a") + uuids("b"))) == 6


def test_mig_mode_on():
    state = dict(nvml_state.node_state("A100-SXM4-80GB", 2, mig_enabled=True))
    assert state["device.0.mig_mode"] == state["device.1.mig_mode"] == "1"


def test_mig_mode_per_gpu():
    """None for a GPU's list: MIG off on that GPU alone (what a layout enabling MIG on some GPUs leaves)."""
    state = dict(nvml_state.node_state("A100-SXM4-80GB", 3, mig_devices=[["1g.10gb"] * 7, None, []]))
    assert [state["device.%d.mig_mode" % index] for index in range(3)] == ["1", "0", "1"]
    assert "device.0.mig.6" in state and "device.0.mig.7" not in state and not any(key.startswith(("device.1.mig.", "device.2.mig.")) for key in state)
    assert all(mode == "0" for key, mode in nvml_state.node_state("A100-SXM4-80GB", 2, mig_devices=[None, None]) if key.endswith(".mig_mode"))
    # a product without MIG: all None is no MIG asked
    assert dict(nvml_state.node_state("A30-24GB", 1, mig_devices=[None]))["device.0.mig_mode"] in ("0", "none")


def test_no_gpus():
    assert dict(nvml_state.node_state("A100-SXM4-80GB", 0))["device_count"] == "0"
    assert not [entry for entry in nvml_state.node_state("A100-SXM4-80GB", 0) if entry[0].startswith("device.")]


def test_render_parse_round_trip_and_comment():
    entries = nvml_state.node_state("B200", 2, node="n")
    text = nvml_state.render(entries, comment="node n\nwritten by a test")
    assert text.startswith("# node n\n# written by a test\nformat 1\n") and text.endswith("\n")
    assert "device.0.name NVIDIA B200\n" in text  # the value is the rest of the line, spaces and all
    assert nvml_state.parse(text) == entries


def test_write_is_atomic_and_says_whether_it_changed(tmp_path):
    path = tmp_path / "state"
    entries = nvml_state.node_state("A30-PCIE-24GB", 1)
    assert nvml_state.write(str(path), entries) is True
    assert nvml_state.write(str(path), entries) is False
    assert nvml_state.parse(path.read_text()) == entries
    assert nvml_state.write(str(path), nvml_state.node_state("A30-PCIE-24GB", 2)) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]  # no temporary file left


@pytest.mark.parametrize(
    "args, message",
    [
        (("A100-SXM4-81GB", 1), "product: unknown GPU product 'A100-SXM4-81GB'. Fix: use one of A100-PCIE-40GB"),
        (("A100-SXM4-80GB", -1), "gpus: must be an integer from 0 to 64, got -1"),
        (("A100-SXM4-80GB", 65), "gpus: must be an integer from 0 to 64, got 65"),
        (("A100-SXM4-80GB", True), "gpus: must be an integer from 0 to 64, got True"),
        (("A100-SXM4-80GB", 1, "two words"), "node: must be a node name without spaces, got 'two words'"),
    ],
)
def test_bad_input(args, message):
    with pytest.raises(nvml_state.NvmlStateError) as error:
        nvml_state.node_state(*args)
    assert str(error.value).startswith(message)
    assert isinstance(error.value, InputError)


def test_values_must_fit_one_line():
    with pytest.raises(nvml_state.NvmlStateError, match="cannot be written on one line"):
        nvml_state.render([("device.0.name", "two\nlines")])


def test_parse_refuses_unknown_keys():
    with pytest.raises(nvml_state.NvmlStateError, match=r"line 2: unknown key 'device\.0\.colour'"):
        nvml_state.parse("format 1\ndevice.0.colour green\n")


def test_the_c_library_reads_exactly_the_keys_written():
    """nvml_mock.c compares keys with strcmp: the keys it knows are the ones node_state writes, no more, no fewer."""
    source = MOCK_SOURCE.read_text()
    device_keys = set(re.findall(r'!strcmp\(key, "([a-z_]+)"\)', source[source.index("static int set_device"):source.index("static int set_global")]))
    global_keys = set(re.findall(r'!strcmp\(key, "([a-z_]+)"\)', source[source.index("static int set_global"):source.index("static nvmlReturn_t load_state")]))
    written = [entry[0] for entry in nvml_state.node_state("A100-SXM4-80GB", 1, xids={0: 79})]
    fields = {key.split(".", 2)[2] for key in written if key.startswith("device.")}
    plain = {field for field in fields if field.split(".")[0] not in nvml_state.DEVICE_TABLES}
    assert plain == device_keys == {*nvml_state.DEVICE_FIELDS, *nvml_state.EVENT_FIELDS}
    assert {key for key in written if not key.startswith("device.")} == global_keys
    assert nvml_state.ENV in source


def test_enums_cover_the_tables():
    assert {facts["architecture"] for facts in gpu_tables.PRODUCTS.values()} <= set(nvml_state.ARCHITECTURES)
    assert {facts["brand"] for facts in gpu_tables.PRODUCTS.values()} <= set(nvml_state.BRANDS)
    assert gpu_products.mig_products()  # every product with MIG answers nvmlDeviceGetMigMode


# ---------------------------------------------------------------------------
# MIG: the product's profiles, and MIG devices placed as NVML places them


def test_a_mig_capable_gpu_carries_every_profile_of_the_tables():
    state = dict(nvml_state.node_state("A30-PCIE-24GB", 1))
    profiles = {p["id"]: p for p in gpu_tables.PRODUCTS["A30-PCIE-24GB"]["mig_profiles"]}
    written = {int(key.rsplit(".", 1)[1]): value for key, value in state.items() if key.startswith("device.0.gi_profile.")}
    assert sorted(written) == sorted(profiles)
    two = profiles[1]
    assert written[1] == "2 2 %d 28 2 2 0 0 0 0 2g.12gb" % two["memory_mib"]
    assert state["device.0.ci_profile.1.1"] == "2 1 28 %d %d 0 0 0" % (two["compute_profiles"][1]["shared_copy_engines"],
                                                                       two["compute_profiles"][1]["shared_decoders"])
    assert not [key for key in state if ".mig." in key]  # no MIG device while MIG is off


def test_mig_devices_are_placed_at_nvidias_first_free_placement():
    state = nvml_state.node_state("A100-SXM4-80GB", 2, node="n", mig_devices=[["1g.10gb"] * 7, []])
    values = dict(state)
    assert values["device.0.mig_mode"] == values["device.1.mig_mode"] == "1"
    devices = [value.split() for key, value in state if key.startswith("device.0.mig.")]
    # gi id, gi profile id, start, size, ci id, ci profile id (the compute profile spanning the instance), uuid
    assert [d[:6] for d in devices] == [[str(n + 1), "0", str(n), "1", "0", "0"] for n in range(7)]
    assert all(re.fullmatch(r"MIG-[0-9a-f-]{36}", d[6]) for d in devices) and len({d[6] for d in devices}) == 7
    assert not [key for key in values if key.startswith("device.1.mig.")]


def test_place_finds_room_that_largest_first_at_the_first_placement_would_not():
    """3g.40gb at 0 leaves 2g.20gb only 4:2 and the two 1g.10gb one slice: 3g at 4 fits them all (found by NVIDIA's
    mig-parted over the mock: tests/integration/test_nvidia_mig_parted.py)."""
    placed = nvml_state.place("A100-SXM4-80GB", ["1g.10gb", "3g.40gb", "2g.20gb", "1g.10gb"])
    assert [(p["name"], start, size) for p, start, size in placed] == [
        ("2g.20gb", 0, 2), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 4)]


def test_place_puts_the_largest_first():
    placed = nvml_state.place("A100-SXM4-80GB", ["1g.10gb", "3g.40gb", "2g.20gb"])
    assert [(p["name"], start, size) for p, start, size in placed] == [("3g.40gb", 0, 4), ("2g.20gb", 4, 2), ("1g.10gb", 6, 1)]


@pytest.mark.parametrize(
    "names, problem",
    [
        (["1g.10gb"] * 8, "do not fit one A100-SXM4-80GB"),  # 7 fit, an 8th does not
        (["4g.40gb", "4g.40gb"], "do not fit one A100-SXM4-80GB"),
        (["4g.40gb", "3g.40gb", "1g.10gb"], "do not fit one A100-SXM4-80GB"),  # 8 compute slices of 7
        (["3g.40gb", "3g.40gb", "1g.10gb"], "no free placements for all of them"),  # the memory slices are taken
        (["9g.99gb"], "'9g.99gb': no such MIG profile of A100-SXM4-80GB"),
    ],
)
def test_place_refuses_what_the_hardware_refuses(names, problem):
    with pytest.raises(nvml_state.NvmlStateError, match=re.escape(problem)):
        nvml_state.place("A100-SXM4-80GB", names)


def test_place_gives_a_gpu_one_media_extension():
    """The A30's 1g.6gb+me and 2g.12gb+me fit its compute and memory slices together but not its one media extension."""
    assert sorted(p["name"] for p, _start, _size in nvml_state.place("A30-PCIE-24GB", ["1g.6gb+me", "2g.12gb"])) == ["1g.6gb+me", "2g.12gb"]
    with pytest.raises(nvml_state.NvmlStateError, match=re.escape("(a GPU has one media extension: one +me instance at most)")):
        nvml_state.place("A30-PCIE-24GB", ["1g.6gb+me", "2g.12gb+me"])


def test_mig_devices_need_one_list_per_gpu():
    with pytest.raises(nvml_state.NvmlStateError, match=r"mig_devices: must be one list of MIG profiles per GPU \(2\)"):
        nvml_state.node_state("A100-SXM4-80GB", 2, mig_devices=[["1g.10gb"]])


def test_an_xid_is_written_for_the_gpus_given_one_only():
    entries = nvml_state.node_state("A100-SXM4-80GB", 3, node="n", xids={1: 79, 2: 13})
    assert [(key, value) for key, value in entries if key.endswith(".xid")] == [("device.1.xid", "79"), ("device.2.xid", "13")]
    assert nvml_state.parse(nvml_state.render(entries)) == entries
    assert not [key for key, _value in nvml_state.node_state("A100-SXM4-80GB", 3, node="n") if key.endswith(".xid")]


@pytest.mark.parametrize("xids", [{2: 79}, {-1: 79}, {0: 0}, {0: "79"}, {0: True}, {0: 2 ** 32}])
def test_an_xid_needs_a_gpu_of_the_node_and_a_code(xids):
    with pytest.raises(nvml_state.NvmlStateError, match=r"^xids: must map a GPU index \(0 to 1\) to an XID code"):
        nvml_state.node_state("A100-SXM4-80GB", 2, xids=xids)


def test_mig_state_round_trips():
    entries = nvml_state.node_state("H100-80GB-HBM3", 2, node="n", mig_devices=[["3g.40gb", "3g.40gb"], ["7g.80gb"]])
    assert nvml_state.parse(nvml_state.render(entries)) == entries


def test_the_c_library_reads_the_mig_tables():
    source = MOCK_SOURCE.read_text()
    for table in nvml_state.DEVICE_TABLES:
        assert '!strncmp(key, "%s.", %d)' % (table, len(table) + 1) in source
