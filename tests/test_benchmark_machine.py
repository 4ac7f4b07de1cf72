"""What a benchmark records of its machine (`benchmarks/machine.py`): the CPU's name, generation, clock and flags."""

from __future__ import annotations

from conftest import load_script

machine = load_script("benchmarks/machine.py")

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
cpu MHz\t\t: 2596.144
flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
cpu family\t: 99
model name\t: another
"""


def test_the_cpu_is_named_with_its_generation_clock_and_flags_of_the_first_processor() -> None:
    info = machine.cpu(CPUINFO)
    assert info["model"] == "AMD EPYC"
    assert info["generation"] == "family 25 model 17"  # "model name" is not "model"
    assert info["mhz"] == 2596
    assert info["flags"]["avx512_bf16"] and info["flags"]["avx512_vnni"] and not info["flags"]["amx_tile"]
    assert machine.has_fast_bf16(info)


def test_a_cpuinfo_without_the_fields_gives_none_rather_than_an_error() -> None:
    info = machine.cpu("processor\t: 0\n")
    assert info["generation"] is None and info["mhz"] is None
    assert not any(info["flags"].values())
