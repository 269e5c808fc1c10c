"""MachineStatus: one line saying what the repros would run on: the GPU, and torch in the repro
interpreter. It says only what was checked (a torch that was not probed yet reads "checking"),
and it shortens itself to fit the terminal: full wordings when there is room, the essentials at
80 columns. The full story (NVML's reason, torch's import error, the interpreter) is its tooltip.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from kb import Environment

GOOD, WARN, MUTED = "$text-success", "$text-warning", "$text-muted"


def gpu_words(env: Environment) -> list[tuple[str, str]]:
    """What the line says about the GPUs, longest first, each with its style."""
    g = env.gpu
    if g is None:
        return [(w, WARN) for w in _no_gpu_words(env.gpu_reason)]
    name = g.name
    short = name.removeprefix("NVIDIA ").strip() or name
    more = f" (+{g.count - 1} more)" if g.count > 1 else ""
    more_short = f" ×{g.count}" if g.count > 1 else ""
    mem = ""
    if g.memory_total_mib:
        used = (g.memory_total_mib - g.memory_free_mib) / 1024
        mem = f"{used:.1f}/{g.memory_total_mib / 1024:.1f} GiB"
    driver = f" · driver {g.driver}" if g.driver else ""
    return [
        (f"GPU {name}{more} · {mem} used{driver}", GOOD),
        (f"GPU {name}{more} · {mem} used", GOOD),
        (f"GPU {short}{more_short} · {mem}", GOOD),
        (f"GPU {short}{more_short}", GOOD),
    ]


def _no_gpu_words(reason: str) -> list[str]:
    r = reason.strip()
    if r.startswith("NVML unavailable"):  # no nvidia-ml-py: there may well be a GPU
        return [
            "GPU unknown: nvidia-ml-py is not installed",
            "GPU unknown (no nvidia-ml-py)",
            "GPU unknown",
        ]
    if r.startswith("no NVIDIA driver"):
        return ["No NVIDIA GPU: no driver found", "No GPU (no driver)", "No GPU"]
    if r.startswith("no GPU visible"):
        spec = r[r.find("(") + 1 : r.rfind(")")] if "(" in r else ""
        return [
            f"No GPU visible ({spec})" if spec else "No GPU visible",
            "No GPU visible",
            "No GPU",
        ]
    if r.startswith("NVML query failed"):
        return ["GPU unknown: the NVML query failed", "GPU unknown"]
    if r == "NVML found no GPU" or not r:
        return ["No NVIDIA GPU found", "No GPU"]
    return [f"No GPU: {r}", "No GPU"]


def torch_words(env: Environment, known: bool) -> list[tuple[str, str]]:
    """What the line says about torch in the repro interpreter, longest first."""
    if not known:
        return [("torch: checking…", MUTED)]
    if env.torch:
        if env.cuda and env.gpu is not None:
            return [
                (f"torch {env.torch} (CUDA {env.cuda}) runs the repros", GOOD),
                (f"torch {env.torch} (CUDA {env.cuda})", GOOD),
                (f"torch {env.torch}", GOOD),
            ]
        if env.cuda:
            return [
                (f"torch {env.torch}: only CPU repros can run", WARN),
                (f"torch {env.torch}", WARN),
            ]
        return [
            (f"torch {env.torch} (CPU build): only CPU repros run", WARN),
            (f"torch {env.torch} (CPU build)", WARN),
            (f"torch {env.torch} (CPU)", WARN),
        ]
    # Repros that do not import torch still run (a segfault's, a KeyError's): f5 says, entry
    # by entry, which cannot and why.
    if "No module named" in env.torch_error or not env.torch_error:
        return [
            ("torch not installed: repros that need it cannot run", WARN),
            ("no torch: repros that need it cannot run", WARN),
            ("no torch", WARN),
        ]
    return [
        ("torch fails to import: repros that need it cannot run", WARN),
        ("torch import fails", WARN),
        ("torch broken", WARN),
    ]


def status_line(env: Environment | None, torch_known: bool, width: int) -> Content:
    """The longest wording that fits `width` cells."""
    if env is None:
        return Content.styled("GPU: checking…", MUTED)
    gpus, torches = gpu_words(env), torch_words(env, torch_known)
    sep = "  ·  " if width >= 100 else " · "
    for gi, ti in _pairs(len(gpus), len(torches)):
        (g, gs), (t, ts) = gpus[gi], torches[ti]
        if len(g) + len(sep) + len(t) <= width:
            return Content.assemble((g, f"bold {gs}"), (sep, MUTED), (t, ts))
    (g, gs), (t, ts) = gpus[-1], torches[-1]
    return Content.assemble((g, f"bold {gs}"), (sep, MUTED), (t, ts)).truncate(
        max(width, 1), ellipsis=True
    )


def _pairs(n_gpu: int, n_torch: int) -> list[tuple[int, int]]:
    """Shorten both parts in turn, the GPU part first at each step."""
    out = []
    for ti in range(n_torch):
        for gi in range(n_gpu):
            out.append((gi, ti))
    return sorted(out, key=lambda p: (p[0] + p[1], p[0]))


def tooltip(env: Environment | None, torch_known: bool) -> str:
    if env is None:
        return "Asking NVML for the GPUs…"
    lines = []
    if env.gpu is not None:
        g = env.gpu
        lines.append(
            f"GPU: {g.name} ×{g.count}, driver {g.driver or '?'}, compute capability "
            f"{g.compute_capability or '?'}"
        )
    else:
        lines.append(f"No GPU: {env.gpu_reason or 'NVML found none'}")
    if not torch_known:
        lines.append(f"Checking whether {env.python} can import torch…")
    elif env.torch:
        lines.append(f"torch {env.torch}, CUDA {env.cuda or 'none (CPU build)'}, in {env.python}")
    else:
        lines.append(f"{env.python} cannot import torch: {env.torch_error or 'not installed'}")
    lines.append("Repros run in that interpreter, on this machine.")
    return "\n".join(lines)


class MachineStatus(Widget):
    environment: reactive[Environment | None] = reactive(None, always_update=True)
    torch_known: reactive[bool] = reactive(False)

    def show(self, env: Environment | None, torch_known: bool) -> None:
        self.set_reactive(MachineStatus.torch_known, torch_known)
        self.environment = env

    def render(self) -> Content:
        return status_line(
            self.environment, self.torch_known, self.content_size.width or self.size.width
        )

    def watch_environment(self, env: Environment | None) -> None:
        self._restyle()

    def watch_torch_known(self, known: bool) -> None:
        self._restyle()

    def _restyle(self) -> None:
        env = self.environment
        self.set_class(env is not None and env.gpu is None, "-no-gpu")
        self.tooltip = tooltip(env, self.torch_known)
        self.refresh()
