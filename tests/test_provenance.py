"""benchmark.provenance: the CPU model is always named (issue 9: "unknown cpu" in pinned files)."""

from __future__ import annotations

import pytest

from benchmark import provenance


@pytest.fixture
def no_cpu_sources(monkeypatch):
    provenance.cpu_model.cache_clear()
    monkeypatch.setattr(provenance, "_cpuinfo", lambda: {})
    monkeypatch.setattr(provenance, "_lscpu_model", lambda: "")
    monkeypatch.setattr(provenance, "_sysctl_brand", lambda: "")
    monkeypatch.setattr(provenance.platform, "processor", lambda: "")
    monkeypatch.setattr(provenance.platform, "machine", lambda: "x86_64")
    yield monkeypatch
    provenance.cpu_model.cache_clear()


def test_cpu_model_on_this_machine_is_named() -> None:
    provenance.cpu_model.cache_clear()
    model = provenance.cpu_model()
    assert model and "unknown" not in model.lower()
    assert model in provenance.machine() and provenance.cpu_description().startswith(model)


def test_cpu_model_falls_back_source_by_source(no_cpu_sources) -> None:
    mp = no_cpu_sources
    assert provenance.cpu_model() == "x86_64 (model not reported by the OS)"
    provenance.cpu_model.cache_clear()
    mp.setattr(
        provenance, "_cpuinfo", lambda: {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143"}
    )
    assert provenance.cpu_model() == "vendor_id GenuineIntel, cpu family 6, model 143"
    provenance.cpu_model.cache_clear()
    mp.setattr(provenance.platform, "processor", lambda: "x86_64")  # the architecture again: not a model
    assert provenance.cpu_model().startswith("vendor_id GenuineIntel")
    provenance.cpu_model.cache_clear()
    mp.setattr(provenance.platform, "processor", lambda: "Intel64 Family 6 Model 143")
    assert provenance.cpu_model() == "Intel64 Family 6 Model 143"
    provenance.cpu_model.cache_clear()
    mp.setattr(provenance, "_lscpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+")
    assert provenance.cpu_model() == "Intel(R) Xeon(R) Platinum 8480+"
    provenance.cpu_model.cache_clear()
    mp.setattr(provenance, "_cpuinfo", lambda: {"model name": "AMD EPYC", "flags": "sse avx2 avx512f"})
    assert provenance.cpu_model() == "AMD EPYC" and provenance.cpu_isa() == "avx512f avx2"
    assert provenance.cpu_description() == "AMD EPYC; avx512f avx2"
