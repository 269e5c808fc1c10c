import json
from pathlib import Path

import pytest

import kb.knowledge.cuda_codes as cuda_codes
from kb.knowledge.cuda_codes import CodeInfo

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "cuda13-error-codes.json"


def test_sections_and_sources():
    t = cuda_codes.table()
    for section in ("runtime", "runtime_legacy", "driver"):
        assert t[section], section
        assert t["source"][section], section
        # keys are decimal integers, stored in numeric order
        keys = [int(k) for k in t[section]]
        assert keys == sorted(keys)


def test_illegal_address_in_every_numbering():
    assert cuda_codes.get("runtime", 700) == CodeInfo(
        "runtime", 700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"
    )
    legacy = cuda_codes.get("runtime-legacy", 77)
    assert legacy.name == "cudaErrorIllegalAddress"
    assert legacy.text == "an illegal memory access was encountered"
    assert cuda_codes.get("driver", 700).name == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_four_means_three_things():
    assert [(c.api, c.name) for c in cuda_codes.by_value(4)] == [
        ("runtime", "cudaErrorCudartUnloading"),
        ("runtime-legacy", "cudaErrorLaunchFailure"),
        ("driver", "CUDA_ERROR_DEINITIALIZED"),
    ]
    assert cuda_codes.get("runtime-legacy", 4).text == "unspecified launch failure"
    assert cuda_codes.get("runtime", 719).name == "cudaErrorLaunchFailure"
    assert cuda_codes.get("driver", 719).name == "CUDA_ERROR_LAUNCH_FAILED"


@pytest.mark.parametrize(
    "value, name, text",
    [
        (2, "cudaErrorMemoryAllocation", "out of memory"),
        (7, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"),
        (8, "cudaErrorInvalidDeviceFunction", "invalid device function"),
        (10, "cudaErrorInvalidDevice", "invalid device ordinal"),
        (11, "cudaErrorInvalidValue", "invalid argument"),
        (30, "cudaErrorUnknown", "unknown error"),
        (
            48,
            "cudaErrorNoKernelImageForDevice",
            "no kernel image is available for execution on the device",
        ),
        (59, "cudaErrorAssert", "device-side assert triggered"),
        (127, "cudaErrorStartupFailure", "startup failure in cuda runtime"),
        (10000, "cudaErrorApiFailureBase", "api failure base"),
    ],
)
def test_legacy_codes_seen_in_old_logs(value, name, text):
    assert cuda_codes.get("runtime-legacy", value) == CodeInfo("runtime-legacy", value, name, text)


def test_unknown_value_and_api():
    assert cuda_codes.by_value(123456) == []
    assert cuda_codes.get("runtime", 10) is None  # a gap in the modern numbering
    with pytest.raises(ValueError):
        cuda_codes.get("cudart", 1)


def test_by_name_prefers_modern_runtime():
    assert cuda_codes.by_name("cudaErrorIllegalAddress") == cuda_codes.get("runtime", 700)
    assert cuda_codes.by_name("cudaErrorAssert").value == 710
    # same name in both numberings at different values: 14 before CUDA 10.1, 205 now
    assert cuda_codes.by_name("cudaErrorMapBufferObjectFailed").value == 205
    assert cuda_codes.by_name("CUDA_ERROR_OUT_OF_MEMORY") == CodeInfo(
        "driver", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"
    )
    assert cuda_codes.by_name("cudaErrorNoSuchThing") is None


def test_every_legacy_name_survives_renumbering():
    # CUDA 10.1 renumbered cudaError_t but dropped no names, so by_name always lands on a modern
    # value; the old value of the same name is the one a pre-10.1 log would print.
    t = cuda_codes.table()
    modern = {e["name"] for e in t["runtime"].values()}
    for value, entry in t["runtime_legacy"].items():
        assert entry["name"] in modern, (value, entry)
        assert cuda_codes.by_name(entry["name"]).api == "runtime"


def test_by_text():
    hits = cuda_codes.by_text("An illegal memory access was encountered ")
    assert [(c.api, c.value) for c in hits] == [
        ("runtime", 700),
        ("runtime-legacy", 77),
        ("driver", 700),
    ]
    assert {(c.api, c.value) for c in cuda_codes.by_text("device-side assert triggered")} == {
        ("runtime", 710),
        ("runtime-legacy", 59),
        ("driver", 710),
    }
    # one text, two different names
    assert [c.name for c in cuda_codes.by_text("invalid device context")] == [
        "cudaErrorDeviceUninitialized",
        "CUDA_ERROR_INVALID_CONTEXT",
    ]
    assert cuda_codes.by_text("illegal memory access") == []  # exact texts only


@pytest.mark.skipif(not REFERENCE.is_file(), reason="shared reference table not present")
def test_matches_reference_dump():
    ref = json.loads(REFERENCE.read_text(encoding="utf-8"))
    ours = cuda_codes.table()
    for section in ("runtime", "driver"):
        for value, entry in ref[section].items():
            assert ours[section].get(value) == entry, (section, value)


def test_distinctive_texts_are_found_through_their_words(monkeypatch):
    """A long CUDA message text anywhere in a line names its code: filed under a word it holds
    whole, it is found wherever the plain `in` test over every text would find it."""
    from kb.knowledge import wrappers as W

    texts = W._distinctive_texts()
    assert len(texts) > 50
    monkeypatch.setattr(W, "_distinctive_calls", W.DISTINCTIVE_INDEX_AFTER)

    def every(low):
        return next((info for text, info in texts if text in low), None)

    lines = []
    for text, _info in texts:
        lines += [text, f"error: {text} (at kernel.cu:12)", f"x{text}y", text[:-2], text[1:]]
    for low in lines:
        assert W._distinctive(low) is every(low), low
    assert W._distinctive("an illegal memory access was encountered").name == (
        "cudaErrorIllegalAddress"
    )
