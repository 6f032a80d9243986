# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's documented MIG geometry (tools/gpu-tables/mig-geometry.yaml) against itself and against the hardware tables.

The data file is loaded by its strict loader (tools/gpu-tables/documented.py), whose placement search ``fits`` is
written from the data file alone. Three things are checked here:

* the file loads, and a malformed file is refused with the product, profile and field named;
* the file is consistent: for every product and profile, the documented instance count is what ``fits`` places of that
  profile alone (and one more does not fit). The table of every product and profile is shown as a warning;
* the collection's hardware tables (plugins/module_utils/hardware/tables.py) are go-nvml's mock merged with the data
  file by tools/gpu-tables/merge.py, the documentation winning: tables.py holds the documented instances, placements
  and engines of every product it shares with the data file, and its ``DISAGREEMENTS`` are what the mock said instead
  (shown as a warning; the Hopper and Blackwell placements the mock makes by compute slices asserted). The merge is
  run again here on the mock's facts as ``DISAGREEMENTS`` restores them and must write tables.py's facts and list.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import re
import warnings
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig, tables

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tools" / "gpu-tables" / "mig-geometry.yaml"
_SPEC = importlib.util.spec_from_file_location("merge", REPO / "tools" / "gpu-tables" / "merge.py")
merge = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(merge)
documented = merge.documented

GEOMETRY = documented.load(DATA)
RAW = copy.deepcopy(GEOMETRY)
PRODUCTS = {product["product"]: product for product in GEOMETRY["products"]}
ROWS = [(product["product"], profile["name"]) for product in GEOMETRY["products"] for profile in product["profiles"]]

# tables.py's product -> the data file's (tables.py keys a product by go-nvml's mock name; merge.py says why they differ).
MOCK_TO_DOCUMENTED = merge.MOCK_TO_DOCUMENTED
# Every product of tables.py -> its documented product: go-nvml's mock's by merge.py's map, where the merge kept the
# mock's name; the others (renamed after their documented NVML name, or written from the documents alone) by their key.
TABLES_TO_DOCUMENTED = {product: MOCK_TO_DOCUMENTED.get(product, product) for product in tables.PRODUCTS}
TABLES_TO_DOCUMENTED_KEYS = {value: key for key, value in TABLES_TO_DOCUMENTED.items()}
HOPPER_AND_BLACKWELL = ("H100-80GB-HBM3", "H200", "B200")


def test_the_data_file_loads():
    assert len(GEOMETRY["products"]) == 20 and len(ROWS) == 149
    assert set(TABLES_TO_DOCUMENTED.values()) <= set(PRODUCTS), "a product of tables.py has no counterpart in the data file"
    assert len(set(TABLES_TO_DOCUMENTED.values())) == len(tables.PRODUCTS) == len(MOCK_TO_DOCUMENTED) + len(merge.DOCUMENTED_FROM)
    assert set(MOCK_TO_DOCUMENTED.values()) <= set(PRODUCTS)


def _product(data, name):
    return next(product for product in data["products"] if product["product"] == name)


def _profile(data, product, name):
    return next(profile for profile in _product(data, product)["profiles"] if profile["name"] == name)


def _set(path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


H100 = "H100-80GB-HBM3"
MALFORMED = {
    "missing product key": (lambda data: _product(data, H100).pop("memory_mib"), "products[H100-80GB-HBM3]: missing key(s) memory_mib"),
    "extra profile key": (lambda data: _profile(data, H100, "1g.20gb").update(mig=True), "products[H100-80GB-HBM3].profiles[1g.20gb]: unknown key(s) mig"),
    "missing document key": (lambda data: data["documents"]["pciids"].pop("commit"), "documents.pciids: missing key(s) commit"),
    "extra top-level key": (lambda data: data.update(servers=[]), "the file: unknown key(s) servers"),
    "fraction above 1": (lambda data: _profile(data, H100, "1g.20gb")["fractions"].update(memory="5/4"),
                         "products[H100-80GB-HBM3].profiles[1g.20gb].fractions.memory: '5/4' is not a fraction"),
    "fraction as the guide's Full": (lambda data: _profile(data, H100, "7g.80gb")["fractions"].update(l2="Full"),
                                     "products[H100-80GB-HBM3].profiles[7g.80gb].fractions.l2: 'Full' is not a fraction"),
    "SM fraction not the name's": (lambda data: _profile(data, H100, "3g.40gb")["fractions"].update(sm="4/7"),
                                   "products[H100-80GB-HBM3].profiles[3g.40gb].fractions.sm: '4/7' is not 3g.40gb's 3"),
    "placement outside": (lambda data: _profile(data, H100, "1g.20gb").update(placements=[[0, 2], [2, 2], [4, 2], [7, 2]]),
                          "products[H100-80GB-HBM3].profiles[1g.20gb].placements: [7, 2] is not inside the product's memory slices [0, 8)"),
    "placements of two sizes": (lambda data: _profile(data, H100, "3g.40gb").update(placements=[[0, 3], [4, 4]]),
                                "products[H100-80GB-HBM3].profiles[3g.40gb].placements: the sizes differ"),
    "unknown source": (lambda data: _profile(data, H100, "2g.20gb")["source"].update(document="nvidia-forum"),
                       "products[H100-80GB-HBM3].profiles[2g.20gb].source.document: 'nvidia-forum' is not a key of documents:"),
    "unknown placements source": (lambda data: _profile(data, H100, "2g.20gb").update(placements_source=["nvidia-forum"]),
                                  "products[H100-80GB-HBM3].profiles[2g.20gb].placements_source[0]: 'nvidia-forum' is not a key of documents:"),
    "inferred from nothing": (lambda data: _profile(data, "H200", "2g.35gb").update(placements_source="inferred-from H300"),
                              "products[H200].profiles[2g.35gb].placements_source: 'H300' is no product"),
    "inferred from a product without those placements": (
        lambda data: _profile(data, "H200", "3g.71gb").update(placements_source="inferred-from A30"),
        "products[H200].profiles[3g.71gb].placements_source: A30 has no profile with the placements [[0, 4], [4, 4]]"),
    "duplicate profile": (lambda data: _product(data, H100)["profiles"].append(copy.deepcopy(_profile(data, H100, "1g.20gb"))),
                          "products[H100-80GB-HBM3].profiles[1g.20gb]: the profile is listed twice"),
    "duplicate product": (lambda data: data["products"].append(copy.deepcopy(_product(data, "B200"))), "products[B200]: the product is listed twice"),
    "PCI id without the vendor": (lambda data: _product(data, H100).update(pci_device_id="0x2330"),
                                  "products[H100-80GB-HBM3].pci_device_id: '0x2330' is not 0x<device><vendor 10de>"),
    "PCI id of another vendor": (lambda data: _product(data, H100).update(pci_device_id="0x233010df"),
                                 "products[H100-80GB-HBM3].pci_device_id: '0x233010df'"),
    "PCI id in upper case": (lambda data: _product(data, H100).update(pci_device_id="0x233010DE"),
                             "products[H100-80GB-HBM3].pci_device_id: '0x233010DE'"),
    "no instance": (lambda data: _profile(data, H100, "4g.40gb").update(instances=0),
                    "products[H100-80GB-HBM3].profiles[4g.40gb].instances: expected a whole number >= 1, found 0"),
    "instances as a boolean": (lambda data: _profile(data, H100, "4g.40gb").update(instances=True),
                               "products[H100-80GB-HBM3].profiles[4g.40gb].instances: expected a whole number >= 1, found True"),
    "more instances than placements": (lambda data: _profile(data, H100, "4g.40gb").update(instances=2),
                                       "products[H100-80GB-HBM3].profiles[4g.40gb].instances: 2 instances but only 1 placements"),
    "memory without its source": (lambda data: _product(data, "A30").update(memory_mib=24576),
                                  "products[A30].memory_mib_sources: memory_mib 24576 needs the document(s) it is read in"),
    "label not the NVML name's": (lambda data: _product(data, "B200").update(product="B200-180GB-HBM3e"),
                                  "products[B200-180GB-HBM3e].product: 'B200-180GB-HBM3e' is not the label of its nvml_name 'NVIDIA B200' (write 'B200')"),
    "profile name": (lambda data: _profile(data, H100, "1g.10gb").update(name="MIG 1g.10gb"),
                     "products[H100-80GB-HBM3].profiles[MIG 1g.10gb].name: 'MIG 1g.10gb' is not a MIG profile name"),
    "engine count as text": (lambda data: _profile(data, H100, "7g.80gb")["engines"].update(ofa="1"),
                             "products[H100-80GB-HBM3].profiles[7g.80gb].engines.ofa: expected a whole number >= 0 or null, found '1'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_is_refused_naming_the_field(case, tmp_path):
    change, message = MALFORMED[case]
    data = copy.deepcopy(RAW)
    change(data)
    path = tmp_path / "mig-geometry.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
    with pytest.raises(ValueError) as raised:
        documented.load(path)
    assert message in str(raised.value), str(raised.value)


@pytest.mark.parametrize("product, profile", ROWS, ids=["%s:%s" % row for row in ROWS])
def test_the_documented_instances_are_what_the_placements_hold(product, profile):
    """The oracle on the data's own consistency: ``instances`` of a profile fit alone, one more does not."""
    row = PRODUCTS[product]
    count = next(entry["instances"] for entry in row["profiles"] if entry["name"] == profile)
    fit, where = documented.fits(row, {profile: count})
    assert fit, where
    fit, reason = documented.fits(row, {profile: count + 1})
    assert not fit, "%d x %s fit on %s (%s): the documented instances (%d) are too few" % (count + 1, profile, product, reason, count)


def _tables_profile(product, name):
    return next((profile for profile in tables.PRODUCTS[product]["mig_profiles"] if profile["name"] == name), None)


def test_the_table_of_every_product_and_profile():
    lines = ["%-50s %-16s %3s  %-22s %-6s %10s  %s" % ("product", "profile", "n", "placements", "memory", "tables MiB", "placements from")]
    for product in GEOMETRY["products"]:
        key = TABLES_TO_DOCUMENTED_KEYS.get(product["product"])
        for profile in product["profiles"]:
            in_tables = _tables_profile(key, profile["name"]) if key else None
            source = profile["placements_source"]
            lines.append("%-50s %-16s %3d  %-22s %-6s %10s  %s" % (
                product["product"], profile["name"], profile["instances"], _placements(profile["placements"]), profile["fractions"]["memory"],
                in_tables["memory_mib"] if in_tables else "", "observed: " + ", ".join(source) if isinstance(source, list) else source))
    assert len(lines) == 1 + len(ROWS)
    warnings.warn("NVIDIA's documented MIG geometry, %d products x profiles (n: the documented instances; memory: the documented fraction, "
                  "of which NVML's MiB is not an exact multiple; tables MiB: tables.py's, for its products):\n%s" % (
                      len(ROWS), "\n".join(lines)), stacklevel=1)


def _placements(placements):
    return "{%s}:%d" % (",".join(str(placement[0]) for placement in placements), placements[0][1])


def _plain(value):
    """Tuples as lists, for comparing what merge.py computes with what tables.py holds."""
    return json.loads(json.dumps(value))


def mock_products():
    """What go-nvml's mock said: tables.py's products with the mock's value put back where ``DISAGREEMENTS`` took the documented one."""
    products = {key: facts for key, facts in _plain(tables.PRODUCTS).items() if key not in merge.DOCUMENTED_FROM}
    for product, profile, field, mock, _documented, _sources, taken in tables.DISAGREEMENTS:
        if taken != "documented":
            continue
        target = products[product] if profile is None else next(entry for entry in products[product]["mig_profiles"] if entry["name"] == profile)
        target[field] = _plain(mock)
    return products


MOCK = mock_products()


def test_the_merge_writes_the_tables_facts_and_disagreements():
    """merge.py on the mock's facts and the data file gives tables.py's products and DISAGREEMENTS (tests/integration/test_gpu_tables.py
    regenerates the file from go-nvml itself)."""
    derived = []
    # the mock's own keys: its NVML names (restored from DISAGREEMENTS) as gpu-feature-discovery labels them
    raw = {merge.key_of(facts["name"]): facts for facts in copy.deepcopy(MOCK).values()}
    assert sorted(raw) == sorted(MOCK_TO_DOCUMENTED)
    products, found = merge.merge(raw, GEOMETRY, derived)
    assert _plain(products) == _plain(tables.PRODUCTS)
    assert _plain(found) == _plain(tables.DISAGREEMENTS)
    assert _plain(derived) == _plain(tables.DERIVED)


def test_the_tables_hold_the_documented_geometry():
    """Every product tables.py shares with the data file has its documented profiles, instances, placements and engines, and its PCI id."""
    for mock_name, name in TABLES_TO_DOCUMENTED.items():
        facts, product = tables.PRODUCTS[mock_name], PRODUCTS[name]
        assert facts["pci_device_id"] == product["pci_device_id"], mock_name
        assert sorted(profile["name"] for profile in facts["mig_profiles"]) == sorted(profile["name"] for profile in product["profiles"]), mock_name
        for row in product["profiles"]:
            profile = _tables_profile(mock_name, row["name"])
            assert profile["instances"] == row["instances"], (mock_name, row["name"])
            assert [list(placement) for placement in profile["placements"]] == row["placements"], (mock_name, row["name"])
            for field, documented_field in merge.ENGINES:
                assert row["engines"][documented_field] in (None, profile[field]), (mock_name, row["name"], field)


def test_the_disagreements_with_go_nvmls_mock():
    warnings.warn("go-nvml's mock vs NVIDIA's documented MIG geometry (tables.py's DISAGREEMENTS, %d):\n%s" % (
        len(tables.DISAGREEMENTS), merge.report(tables.DISAGREEMENTS)), stacklevel=1)
    assert len(tables.DISAGREEMENTS) == 78
    documents = set(GEOMETRY["documents"])
    # The products where go-nvml's mock gives a profile more than its share of the GPU's memory (its documented memory
    # slices of 8), counted here from the mock's figures: their memory is the documented one.
    over = {product for product, facts in MOCK.items() for profile in facts["mig_profiles"] if "A30" not in product and
            profile["memory_mib"] * 8 > _tables_profile(product, profile["name"])["placements"][0][1] * facts["memory_mib"]}
    assert over == {"H200", "B200"}
    for product, profile, field, mock, value, sources, taken in tables.DISAGREEMENTS:
        assert product in tables.PRODUCTS and mock != value
        assert all(source in documents or source.startswith("inferred-from ") or source == "placements" for source in sources), sources
        # The documentation wins, except on the product's NVML name (its key) and the memory of a product whose mock
        # figures are within their shares: stated here, not read from merge.KEPT, so a change of merge.py's rule fails.
        kept = profile is None and ((field == "name" and not sources) or (field == "memory_mib" and product not in over))
        assert taken == ("mock" if kept else "documented"), (product, profile, field)
    keys = {row[:3] for row in tables.DISAGREEMENTS}
    assert not [key for key in keys if key[2] in ("profile", "instances")]
    # The mock places Hopper and Blackwell GPU instances by compute slices; the hardware by memory slices.
    placements = {(product, profile) for product, profile, field in keys if field == "placements"}
    assert placements == {(product, profile) for product in HOPPER_AND_BLACKWELL
                          for profile in {"H100-80GB-HBM3": ("1g.20gb", "3g.40gb", "7g.80gb"), "H200": ("1g.35gb", "3g.71gb", "7g.141gb"),
                                          "B200": ("1g.45gb", "3g.90gb", "7g.180gb")}[product]}, sorted(placements)
    h100 = {row[1]: (_placements(row[3]), _placements(row[4])) for row in tables.DISAGREEMENTS if row[0] == H100 and row[2] == "placements"}
    assert h100 == {"1g.20gb": ("{0,1,2,3,4,5,6}:1", "{0,2,4,6}:2"), "3g.40gb": ("{0,4}:3", "{0,4}:4"), "7g.80gb": ("{0}:7", "{0}:8")}
    # The device ids go-nvml's mock gives the H200 and the B200 are not theirs (0x2b00 is another GPU's in pci.ids).
    pci = {row[0]: row[3:5] for row in tables.DISAGREEMENTS if row[2] == "pci_device_id"}
    assert pci == {"H200": ("0x233310de", "0x233510de"), "B200": ("0x2b0010de", "0x290110de")}
    names = {row[0]: row[3:5] for row in tables.DISAGREEMENTS if row[2] == "name"}
    # a name a document confirms is taken, the product keyed by it; an unconfirmed one stays the mock's
    assert names == {"H200": ("NVIDIA H200 141GB HBM3e", "NVIDIA H200"), "B200": ("NVIDIA B200 180GB HBM3e", "NVIDIA B200"),
                     "A30-PCIE-24GB": ("NVIDIA A30-PCIE-24GB", "NVIDIA A30"), "A100-PCIE-80GB": ("NVIDIA A100-PCIE-80GB", "NVIDIA A100 80GB PCIe")}
    assert tables.PRODUCTS["H200"]["name"] == "NVIDIA H200" and tables.PRODUCTS["A30-PCIE-24GB"]["name"] == "NVIDIA A30-PCIE-24GB"
    assert {row[0]: row[3:5] + row[6:] for row in tables.DISAGREEMENTS if row[2] == "memory_mib" and row[1] is None} == {
        "H100-80GB-HBM3": (81920, 81559, "mock"), "H200": (144384, 143771, "documented"), "B200": (184320, 183359, "documented")}
    # their profiles: each its share of the observed total, rounded down (an eighth of the H200's 143771 MiB is 17971.4)
    shares = {(row[0], row[1]): row[4] for row in tables.DISAGREEMENTS if row[2] == "memory_mib" and row[1] is not None}
    assert shares[("H200", "1g.18gb")] == 17971 and shares[("H200", "7g.141gb")] == 143771
    assert shares[("B200", "1g.23gb")] == 22919 and shares[("B200", "1g.45gb")] == 45839


def test_the_products_written_from_the_documents():
    """The H100 NVL and the GH200 (GH100, as the H100 80GB HBM3 of go-nvml's mock) and the H200 NVL (as its H200): their
    own name, PCI id, observed memory and documented profiles; the rest from that product, every such value in DERIVED."""
    for name, memory, pci, template in (("H100-NVL", 95830, "0x232110de", "H100-80GB-HBM3"), ("GH200-480GB", 97871, "0x234210de", "H100-80GB-HBM3"),
                                        ("H200-NVL", 143771, "0x233b10de", "H200")):
        facts, row = tables.PRODUCTS[name], PRODUCTS[name]
        assert (facts["name"], facts["memory_mib"], facts["pci_device_id"]) == (row["nvml_name"], memory, pci)
        assert (facts["architecture"], facts["cuda_compute_capability"]) == ("Hopper", "9.0")
        assert [p["name"] for p in sorted(facts["mig_profiles"], key=lambda p: p["name"])] == sorted(p["name"] for p in row["profiles"])
        for profile in facts["mig_profiles"]:
            size = profile["placements"][0][1]
            assert profile["memory_mib"] == memory * size // 8, (name, profile["name"])
            assert all(c["name"] == profile["name"] or c["name"].endswith("." + profile["name"]) for c in profile["compute_profiles"])
        derived = {(row[1], row[2]): row[3:] for row in tables.DERIVED if row[0] == name}
        assert derived[(None, "brand")] == ("Nvidia", "from " + template)
        smallest = min(facts["mig_profiles"], key=lambda p: (p["placements"][0][1], p["name"]))["name"]
        assert derived[(smallest, "memory_mib")] == (memory // 8, "share of memory_mib")
    assert {p["name"] for p in tables.PRODUCTS["H100-NVL"]["mig_profiles"]} >= {"1g.12gb", "3g.47gb", "7g.94gb"}
    assert {p["name"] for p in tables.PRODUCTS["GH200-480GB"]["mig_profiles"]} >= {"1g.12gb", "3g.48gb", "7g.96gb"}


def test_the_issues_example_is_refused():
    assert documented.fits(PRODUCTS[H100], {"1g.20gb": 4, "3g.40gb": 1}) == (False, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)")
    assert documented.fits(PRODUCTS["A100-SXM4-80GB"], {"1g.20gb": 4, "3g.40gb": 1}) == (
        False, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)")
    assert documented.fits(PRODUCTS[H100], {"1g.20gb": 2, "3g.40gb": 1}) == (True, "3g.40gb at 0, 1g.20gb at 4/6")
    assert documented.fits(PRODUCTS[H100], {"4g.40gb": 1, "3g.40gb": 1})[0]


def test_the_search_names_the_other_causes():
    assert documented.fits(PRODUCTS[H100], {"1g.10gb+me": 1, "1g.10gb": 6})[0]
    assert documented.fits(PRODUCTS[H100], {"1g.10gb+me": 2}) == (
        False, "2 media-extended instances (2 x 1g.10gb+me), while a GPU has one media extension")
    assert documented.fits(PRODUCTS["RTX-PRO-6000-Blackwell-Server-Edition"], {"1g.24gb+me": 1, "2g.48gb+me.all": 1})[1].startswith(
        "2 media-extended instances (1g.24gb+me + 2g.48gb+me.all)")
    assert documented.fits(PRODUCTS[H100], {"4g.40gb": 1, "2g.20gb": 2}) == (
        False, "needs 8 of 7 compute slices (2 x 2g.20gb at 2 each + 4g.40gb at 4)")
    assert documented.fits(PRODUCTS[H100], {"5g.50gb": 1}) == (
        False, "H100-80GB-HBM3 has no profile 5g.50gb (its profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)")
    # Enough memory and compute slices, but the placements do not combine. No documented layout of up to 7 instances
    # is refused so (the geometry is aligned): this product is changed, its 2g.20gb placed only at 2, inside 4g.40gb's.
    product = copy.deepcopy(PRODUCTS[H100])
    next(profile for profile in product["profiles"] if profile["name"] == "2g.20gb")["placements"] = [[2, 2]]
    assert documented.fits(product, {"2g.20gb": 1, "4g.40gb": 1}) == (
        False, "needs 6 of 8 memory slices, but no combination of the documented placements holds them (2g.20gb at {2}:2; 4g.40gb at {0}:4)")


def allows(profiles, layout):
    """Whether ``layout`` fits ``profiles`` (a product's mig_profiles) by their placements alone: none overlapping, each
    profile at most its instances. A local helper for this comparison (not nvml_state)."""
    profiles = {profile["name"]: profile for profile in profiles}
    if any(count > profiles[name]["instances"] for name, count in layout.items()):
        return False
    instances = [name for name, count in sorted(layout.items()) for index in range(count)]

    def place(position, used):
        if position == len(instances):
            return True
        for start, size in profiles[instances[position]]["placements"]:
            mask = ((1 << size) - 1) << start
            if not used & mask and place(position + 1, used | mask):
                return True
        return False
    return place(0, 0)


MOCK_ONLY = [
    ("H100-80GB-HBM3", {"1g.20gb": 4, "3g.40gb": 1}, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)"),
    ("H100-80GB-HBM3", {"1g.20gb": 1, "3g.40gb": 2}, "needs 10 of 8 memory slices (1g.20gb at 2 + 2 x 3g.40gb at 4 each)"),
    ("H200", {"1g.35gb": 3, "4g.71gb": 1}, "needs 10 of 8 memory slices (3 x 1g.35gb at 2 each + 4g.71gb at 4)"),
    ("H200", {"1g.35gb": 2, "2g.35gb": 1, "3g.71gb": 1},
     "needs 10 of 8 memory slices (2 x 1g.35gb at 2 each + 2g.35gb at 2 + 3g.71gb at 4)"),
    ("B200", {"1g.45gb": 4, "2g.45gb": 1}, "needs 10 of 8 memory slices (4 x 1g.45gb at 2 each + 2g.45gb at 2)"),
    ("B200", {"1g.23gb": 2, "1g.45gb": 2, "3g.90gb": 1},
     "needs 10 of 8 memory slices (2 x 1g.23gb at 1 each + 2 x 1g.45gb at 2 each + 3g.90gb at 4)"),
]


@pytest.mark.parametrize("mock_product, layout, reason", MOCK_ONLY, ids=["%s:%s" % (case[0], "+".join("%dx%s" % (c, n) for n, c in case[1].items()))
                                                                         for case in MOCK_ONLY])
def test_a_layout_the_mock_allowed_is_refused_as_the_documents_refuse_it(mock_product, layout, reason):
    assert allows(MOCK[mock_product]["mig_profiles"], layout)
    assert not allows(tables.PRODUCTS[mock_product]["mig_profiles"], layout)
    assert documented.fits(PRODUCTS[TABLES_TO_DOCUMENTED[mock_product]], layout) == (False, reason)


def _layouts(product):
    names = [profile["name"] for profile in product["profiles"] if "+me" not in profile["name"]]
    for counts in itertools.product(range(8), repeat=len(names)):
        if 0 < sum(counts) <= 7:
            yield {name: count for name, count in zip(names, counts) if count}


@pytest.mark.parametrize("mock_product", sorted(TABLES_TO_DOCUMENTED))
def test_the_tables_and_the_documents_judge_every_layout_alike(mock_product):
    """Every layout of up to 7 instances (without +me) is allowed by tables.py's placements exactly when the documented ones hold it."""
    product = PRODUCTS[TABLES_TO_DOCUMENTED[mock_product]]
    compared = 0
    for layout in _layouts(product):
        assert allows(tables.PRODUCTS[mock_product]["mig_profiles"], layout) == documented.fits(product, layout)[0], layout
        compared += 1
    assert compared > 100


def _model(product, layout):
    """What the roles decide of a layout (``mig.fit_devices``, which every node's ``mig.devices`` goes through): ``None``
    when it fits, else the refusal."""
    try:
        mig.fit_devices(product, layout, "n.mig")
    except mig.MigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("mock_product", sorted(TABLES_TO_DOCUMENTED))
def test_the_roles_refuse_exactly_the_layouts_the_documents_refuse_naming_the_same_slices(mock_product):
    """Every layout of up to 7 instances (without +me): the model the roles use refuses it exactly when the documented
    placements cannot hold it, and names the slices the documents' search counts ("needs 12 of 8 memory slices" is "they
    need 12 of its 8 memory slices")."""
    product = PRODUCTS[TABLES_TO_DOCUMENTED[mock_product]]
    refused = 0
    for layout in _layouts(product):
        fits, reason = documented.fits(product, layout)
        refusal = _model(mock_product, layout)
        assert (refusal is None) == fits, (layout, reason, refusal)
        if not fits:
            refused += 1
            counted = re.findall(r"needs ([0-9]+) of ([0-9]+) (compute|memory) slices \(", reason)
            assert refusal.startswith("n.mig.devices: "), refusal
            if counted:
                assert any("need %s of its %s %s slices" % found in refusal for found in counted), (reason, refusal)
    assert refused > 100


def test_the_issues_layout_is_refused_by_the_roles_naming_the_memory_it_needs():
    assert _model("H100-80GB-HBM3", {"1g.20gb": 4, "3g.40gb": 1}) == (
        "n.mig.devices: 4 x 1g.20gb + 1 x 3g.40gb do not fit one H100-80GB-HBM3: they need 12 of its 8 memory slices (4 x 1g.20gb "
        "at 2 each + 3g.40gb at 4): 122880 MiB of memory, the GPU has 81920 MiB. Fix: use at most 8 memory slices per GPU (per "
        "instance: 1g.10gb 1, 1g.20gb 2, 2g.20gb 2, 3g.40gb 4, 4g.40gb 4, 7g.80gb 8), or spread the layout over more GPUs")
    assert _model("H100-80GB-HBM3", {"1g.20gb": 2, "3g.40gb": 1}) is None


@pytest.mark.parametrize("mock_product", HOPPER_AND_BLACKWELL)
def test_the_mock_allowed_more_than_the_documents_on_hopper_and_blackwell(mock_product):
    product = PRODUCTS[TABLES_TO_DOCUMENTED[mock_product]]
    mock_only, documented_only = [], []
    for layout in _layouts(product):
        mock, fit = allows(MOCK[mock_product]["mig_profiles"], layout), documented.fits(product, layout)[0]
        if mock and not fit:
            mock_only.append(layout)
        elif fit and not mock:
            documented_only.append(layout)
    # The mock's 3g and 7g are 3 and 7 slices wide where the hardware's are 4 and 8: nothing the documents allow was refused by it.
    assert not documented_only, documented_only
    assert len(mock_only) >= 3, mock_only


@pytest.mark.parametrize("mock_product", sorted(TABLES_TO_DOCUMENTED))
def test_the_dra_tracks_mig_devices_are_the_documented_placements(mock_product):
    """A MIG node on the DRA track publishes, per GPU, one device per documented placement of each profile (the first
    ``instances`` of them, +me profiles left out) consuming the profile's compute slices (its ``<n>g``) and exactly the
    documented memory slices, and a counter set of the documented compute and memory slices: the scheduler, counting
    them, allows what the documents allow. Read from the ResourceSlices the driver writes, compared with the data file."""
    from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra

    product = PRODUCTS[TABLES_TO_DOCUMENTED[mock_product]]
    node = dra.normalize_nodes([{"name": "m", "gpus": 1, "mig": True}], mock_product)[0]
    slices = dra.node_slices(node)
    [counter_set] = [c for s in slices for c in s["spec"].get("sharedCounters", [])]
    memory = ["memory-slice-%d" % index for index in range(product["memory_slices"])]
    assert counter_set["counters"] == dict({"compute-slices": {"value": str(product["compute_slices"])}}, **{m: {"value": "1"} for m in memory})
    published = {}
    for device in (d for s in slices for d in s["spec"].get("devices", [])):
        [consumed] = device["consumesCounters"]
        taken = sorted(int(key.rsplit("-", 1)[1]) for key in consumed["counters"] if key.startswith("memory-slice-"))
        published.setdefault(device["attributes"]["profile"]["string"], []).append(
            (taken[0], len(taken), int(consumed["counters"]["compute-slices"]["value"])))
    want = {}
    for profile in product["profiles"]:
        if "+me" in profile["name"]:
            continue
        compute = int(profile["name"].split("g.", 1)[0])
        want[profile["name"]] = [(start, size, compute) for start, size in profile["placements"][:profile["instances"]]]
    assert published == want
