"""`python -m tui.measure`: how fast the TUI is usable, and how fast results follow typing.

Figures go into tui/PERFORMANCE.md. Runs headless (Textual's test driver), on the real bundled
knowledge base, in this process:

- import: `import tui.app` (Textual, rich, kb's lookup);
- mount: App created -> on_mount finished (the screen is laid out; first paint follows);
- first frame: App created -> Textual's Ready event (the first frame is displayed);
- entries: App created -> the entry list filled (the knowledge base loads in a worker, started
  after the first frame);
- result: the debounce timer firing -> the results list updated, for a one-line paste and a
  large log (lookup runs in a worker; this includes the hop back to the UI thread).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import asyncio  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

from . import app as tui_app  # noqa: E402

T_IMPORT = time.perf_counter() - T0

ONE_LINE = "RuntimeError: CUDA error: an illegal memory access was encountered"


def big_log(lines: int) -> str:
    body = "".join(
        f"2026-01-01 12:00:{i % 60:02d} [rank0]: step {i} loss 0.{i % 97:02d} lr 3e-4\n"
        for i in range(lines)
    )
    return body + "Traceback (most recent call last):\n" + ONE_LINE + "\n"


async def measure(rounds: int) -> dict[str, float]:
    from textual.widgets import TextArea

    from .results_list import ResultsList

    out: dict[str, float] = {"import_ms": T_IMPORT * 1000}
    app = tui_app.create_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.mounted_at is not None  # on_mount has run once the pilot is up
        out["mount_ms"] = (app.mounted_at - app._created) * 1000
        while app.ready_at is None or app.kb_ready_at is None:
            await asyncio.sleep(0.002)
        assert app.query_one(ResultsList).option_count
        out["first_frame_ms"] = (app.ready_at - app._created) * 1000
        out["entries_ms"] = (app.kb_ready_at - app._created) * 1000
        out["usable_total_ms"] = T_IMPORT * 1000 + max(out["first_frame_ms"], out["entries_ms"])
        area = app.query_one("#paste", TextArea)
        for name, text in (("one_line", ONE_LINE), ("log_10k_lines", big_log(10_000))):
            results: list[float] = []
            lookups: list[float] = []
            for i in range(rounds):
                app.last_result_ms = None
                area.load_text(text + "\n" * (i % 2))  # a change every round
                while app.last_result_ms is None:
                    await asyncio.sleep(0.002)
                results.append(app.last_result_ms)
                lookups.append(app.last_lookup_ms)
            out[f"result_{name}_median_ms"] = statistics.median(results)
            out[f"result_{name}_max_ms"] = max(results)
            out[f"lookup_{name}_median_ms"] = statistics.median(lookups)
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for k, v in asyncio.run(measure(rounds)).items():
        print(f"{k:34} {v:8.1f}")


if __name__ == "__main__":
    main()
