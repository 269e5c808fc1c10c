"""GpuStatus: one line saying which GPU repros would run on, or plainly that there is none."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from .services import GpuState


class GpuStatus(Static):
    state: reactive[GpuState | None] = reactive(None, always_update=True)

    def render_state(self, s: GpuState | None) -> Content:
        if s is None:
            return Content.from_markup("[$text-muted]GPU: checking…[/]")
        if not s.available:
            return Content.from_markup("[b $text-warning]No NVIDIA GPU[/] · CPU-only repros run · [$text-muted]$why[/]",
                                       why=s.detail or "NVML found none")
        mem = ""
        if s.memory_total_mib:
            used = f"{s.memory_used_mib / 1024:.1f}" if s.memory_used_mib is not None else "?"
            mem = f"{used}/{s.memory_total_mib / 1024:.1f} GiB used"
        more = f" (+{s.count - 1} more)" if s.count > 1 else ""
        parts = [p for p in (mem, f"driver {s.driver}" if s.driver else "") if p]
        return Content.from_markup("[b $text-success]GPU[/] [b]$name[/]$more [$text-muted]$rest[/]",
                                   name=s.name, more=more, rest=" · ".join(parts))

    def watch_state(self, state: GpuState | None) -> None:
        self.set_class(state is not None and not state.available, "-no-gpu")
        self.update(self.render_state(state))
