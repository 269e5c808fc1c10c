"""The root failure, always (issue 23): every log that shows a failure names its first failure,
whether or not an entry knows it: the exception (type as printed, message), or the signal / exit
status / launcher report / kernel line; its line; the frame that raised it and the user's own
frame, each with its package.

The logs below are written for these tests in the formats the programs print: Python's own
traceback module (frames, chained exceptions, "[Previous line repeated]"), torch's wrappers
(torch/multiprocessing/spawn.py, torch/_utils.py ExceptionWrapper.reraise, torchrun's
ChildFailedError summary in torch/distributed/elastic/multiprocessing/errors/__init__.py and
its agent's "failed (exitcode: ...)" line in .../multiprocessing/api.py), Ray's RayTaskError.__str__,
concurrent.futures' _RemoteTraceback, faulthandler, bash, zsh, srun, slurmstepd and the kernel.
Each is read twice where it matters: as a short message (every line kept) and as a log stream
(only trigger lines kept, the traceback coming from Line.context).
"""

from __future__ import annotations

import json

import pytest

from kb.diagnosis.engine import default_engine
from kb.diagnosis.root import find_root, package_of
from kb.model.root import Origin, Relation, RootKind
from kb.scan.extract import scan, scan_text

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache


def as_message(text: str):
    return find_root(scan_text(text))


def as_stream(text: str):
    """The log read as a stream: only lines with a trigger word (the engine's) are candidates."""
    data = text.encode()
    chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    return find_root(scan(chunks, triggers=default_engine().triggers))


BOTH = pytest.mark.parametrize("read", [as_message, as_stream], ids=["message", "stream"])


# ---------------------------------------------------------------- chained exceptions
CONTEXT = """\
Loading config from configs/base.yaml
Traceback (most recent call last):
  File "/home/ana/proj/train.py", line 88, in build_model
    layer = registry[cfg.model.name]
            ~~~~~~~~^^^^^^^^^^^^^^^^
KeyError: 'resnet51'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/ana/proj/train.py", line 140, in <module>
    model = build_model(cfg)
  File "/home/ana/proj/train.py", line 90, in build_model
    raise ValueError(f"unknown model {cfg.model.name}")
ValueError: unknown model resnet51
"""

CAUSE = """\
Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status
    response.raise_for_status()
  File "/opt/conda/lib/python3.11/site-packages/requests/models.py", line 1024, in raise_for_status
    raise HTTPError(http_error_msg, response=self)
requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/org/private-model/resolve/main/config.json

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/transformers/utils/hub.py", line 403, in cached_file
    resolved_file = hf_hub_download(
  File "/opt/conda/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 459, in hf_raise_for_status
    raise _format(RepositoryNotFoundError, message, response) from e
huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-6650a1b2-7c3d)

Repository Not Found for url: https://huggingface.co/org/private-model/resolve/main/config.json.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/ana/proj/finetune.py", line 12, in <module>
    model = AutoModel.from_pretrained("org/private-model")
  File "/opt/conda/lib/python3.11/site-packages/transformers/utils/hub.py", line 426, in cached_file
    raise EnvironmentError(
OSError: org/private-model is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'
If this is a private repository, make sure to pass a token having permission to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`
"""


@BOTH
def test_during_handling_the_first_exception_is_the_root(read):
    root = read(CONTEXT)
    assert root.kind is RootKind.EXCEPTION
    assert (root.exception, root.message) == ("KeyError", "'resnet51'")
    assert root.line_number == 6 and root.line == "KeyError: 'resnet51'"
    assert root.frame.function == "build_model" and root.frame.line == 88
    assert root.raised_in is Origin.USER and root.package == ""
    assert root.frame.code == "layer = registry[cfg.model.name]"  # not the caret line under it
    assert [(c.relation, c.exception, c.line_number) for c in root.chain] == [
        (Relation.CONTEXT, "ValueError", 15)
    ]
    assert root.others == 0


@BOTH
def test_direct_cause_leads_to_the_original(read):
    root = read(CAUSE)
    assert root.exception == "requests.exceptions.HTTPError"
    assert root.message.startswith("401 Client Error: Unauthorized for url")
    assert root.line_number == 6
    assert root.package == "requests" and root.raised_in is Origin.PACKAGE
    assert root.user_frame is None  # every frame of that traceback is in a package
    assert [(c.relation, c.exception) for c in root.chain] == [
        (Relation.CAUSE, "huggingface_hub.errors.RepositoryNotFoundError"),
        (Relation.CAUSE, "OSError"),
    ]


def test_a_message_goes_on_over_the_lines_after_it():
    root = as_message(CAUSE.split("The above exception")[2])  # the OSError's traceback alone
    assert root.exception == "OSError"
    assert root.message.splitlines() == [
        "org/private-model is not a local folder and is not a valid model identifier listed on "
        "'https://huggingface.co/models'",
        "If this is a private repository, make sure to pass a token having permission to this repo "
        "either by logging in with `huggingface-cli login` or by passing `token=<your_token>`",
    ]
    assert root.user_frame.file == "/home/ana/proj/finetune.py" and root.user_frame.line == 12
    assert root.package == "transformers"


def test_an_exception_raised_without_a_message_has_none():
    """`raise NotImplementedError` prints the class alone; the log's next line is not its
    message (Python continues a message on the next lines only after "Name: ")."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/app/tokenize_data.py", line 31, in load\n'
        "    raise NotImplementedError\n"
        "NotImplementedError\n"
        "Process Process-2:\n"
    )
    root = find_root(scan_text(log))
    assert root.exception == "NotImplementedError" and root.message == ""
    with_colon = find_root(scan_text(log.replace("\nNotImplementedError\n", "\nValueError: \n")))
    assert with_colon.exception == "ValueError" and with_colon.message == "Process Process-2:"


# ---------------------------------------------------------------- wrappers
MP_SPAWN = """\
Traceback (most recent call last):
  File "/work/ddp_main.py", line 61, in <module>
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 328, in spawn
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 284, in start_processes
    while not context.join():
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 203, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 90, in _wrap
    fn(i, *args)
  File "/work/ddp_main.py", line 40, in worker
    ckpt = torch.load(f"/ckpt/rank{rank}.pt")
  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 986, in load
    with _open_file_like(f, 'rb') as opened_file:
  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 435, in __init__
    super().__init__(open(name, mode))
FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/rank1.pt'
"""

DATALOADER = """\
Epoch 3:  41%|████      | 812/1980 [02:11<03:09,  6.17it/s, loss=0.412]
Traceback (most recent call last):
  File "/home/kim/seg/train.py", line 77, in <module>
    for images, masks in loader:
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/utils/data/dataloader.py", line 701, in __next__
    data = self._next_data()
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/utils/data/dataloader.py", line 1465, in _next_data
    return self._process_data(data)
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/utils/data/dataloader.py", line 1491, in _process_data
    data.reraise()
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/_utils.py", line 715, in reraise
    raise exception
KeyError: Caught KeyError in DataLoader worker process 2.
Original Traceback (most recent call last):
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/utils/data/_utils/worker.py", line 351, in _worker_loop
    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]
  File "/home/kim/.venv/lib/python3.12/site-packages/torch/utils/data/_utils/fetch.py", line 52, in fetch
    data = [self.dataset[idx] for idx in possibly_batched_index]
  File "/home/kim/seg/data.py", line 31, in __getitem__
    label = self.class_ids[row["category"]]
KeyError: 'traffic_cone'
"""

RAY = """\
2024-06-02 10:14:07,118\tINFO worker.py:1749 -- Started a local Ray instance.
Traceback (most recent call last):
  File "/home/lee/tune_job.py", line 23, in <module>
    results = ray.get([score.remote(x) for x in shards])
  File "/home/lee/miniconda3/envs/rl/lib/python3.10/site-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper
    return fn(*args, **kwargs)
  File "/home/lee/miniconda3/envs/rl/lib/python3.10/site-packages/ray/_private/worker.py", line 2623, in get
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(ZeroDivisionError): ray::score() (pid=48113, ip=10.1.2.3)
  File "/home/lee/tune_job.py", line 15, in score
    return total / len(batch)
ZeroDivisionError: division by zero
"""

REMOTE = """\
concurrent.futures.process._RemoteTraceback:
\"\"\"
Traceback (most recent call last):
  File "/usr/lib/python3.11/concurrent/futures/process.py", line 256, in _process_worker
    r = call_item.fn(*call_item.args, **call_item.kwargs)
  File "/srv/prep/shard.py", line 19, in tokenize_shard
    with open(path) as fh:
PermissionError: [Errno 13] Permission denied: '/data/shards/007.jsonl'
\"\"\"

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/prep/run.py", line 33, in <module>
    for n in pool.map(tokenize_shard, paths):
  File "/usr/lib/python3.11/concurrent/futures/process.py", line 620, in _chain_from_iterable_of_lists
    for element in iterable:
  File "/usr/lib/python3.11/concurrent/futures/_base.py", line 401, in __get_result
    raise self._exception
PermissionError: [Errno 13] Permission denied: '/data/shards/007.jsonl'
"""


@BOTH
def test_mp_spawn_leads_to_the_process_error(read):
    root = read(MP_SPAWN)
    assert root.exception == "FileNotFoundError" and root.line_number == 22
    assert root.message == "[Errno 2] No such file or directory: '/ckpt/rank1.pt'"
    assert root.package == "torch" and root.frame.function == "__init__"
    assert (root.user_frame.file, root.user_frame.line, root.user_frame.function) == (
        "/work/ddp_main.py",
        40,
        "worker",
    )
    assert [(c.relation, c.wrapper) for c in root.chain] == [(Relation.WRAPPER, "mp.spawn")]
    assert root.chain[0].exception == "torch.multiprocessing.spawn.ProcessRaisedException"


@BOTH
def test_dataloader_worker_leads_to_the_original_traceback(read):
    root = read(DATALOADER)
    assert (root.exception, root.message, root.line_number) == ("KeyError", "'traffic_cone'", 21)
    assert root.frame.file == "/home/kim/seg/data.py" and root.raised_in is Origin.USER
    assert root.user_frame == root.frame
    assert [f.package for f in root.frames] == [
        "torch",
        "torch",
        "",
    ]  # the worker's, not the loop's
    assert root.chain[0].wrapper == "dataloader-worker"
    assert root.chain[0].message == "Caught KeyError in DataLoader worker process 2."


@BOTH
def test_ray_task_error_leads_to_its_cause(read):
    root = read(RAY)
    assert (root.exception, root.line_number) == ("ZeroDivisionError", 12)
    assert root.frame.function == "score" and root.raised_in is Origin.USER
    assert root.chain[0].exception == "ray.exceptions.RayTaskError(ZeroDivisionError)"
    assert root.chain[0].wrapper == "ray" and not root.truncated


@BOTH
def test_remote_traceback_leads_to_the_worker_exception(read):
    root = read(REMOTE)
    assert root.exception == "PermissionError" and root.line_number == 8
    assert root.frame.file == "/srv/prep/shard.py"
    assert root.chain[0].wrapper == "remote-traceback"
    assert root.others == 0  # the re-raise in the parent is the same error, not another one


NOTEBOOK_LAUNCHER = """\
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/accelerate/launchers.py", line 240, in notebook_launcher
    start_processes(launcher, args=args, nprocs=num_processes, start_method="fork")
  File "/opt/conda/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 203, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 0 terminated with the following error:
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 90, in _wrap
    fn(i, *args)
  File "/tmp/ipykernel_51/2203741447.py", line 12, in training_loop
    loss = criterion(model(x), y)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 3479, in cross_entropy
    return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index, label_smoothing)
ValueError: Expected input batch_size (16) to match target batch_size (8).

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/tmp/ipykernel_51/1453205537.py", line 1, in <module>
    notebook_launcher(training_loop, num_processes=2)
  File "/opt/conda/lib/python3.10/site-packages/accelerate/launchers.py", line 250, in notebook_launcher
    raise RuntimeError(f"An issue was found when launching the training: {e}") from e
RuntimeError: An issue was found when launching the training:

-- Process 0 terminated with the following error:
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 90, in _wrap
    fn(i, *args)
  File "/tmp/ipykernel_51/2203741447.py", line 12, in training_loop
    loss = criterion(model(x), y)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 3479, in cross_entropy
    return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index, label_smoothing)
ValueError: Expected input batch_size (16) to match target batch_size (8).
"""

MP_EXITED = """\
Traceback (most recent call last):
  File "/work/ddp.py", line 30, in <module>
    mp.spawn(run, args=(2,), nprocs=2)
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 170, in join
    raise ProcessExitedException(
torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL
"""


@BOTH
def test_accelerate_notebook_launcher_leads_to_the_process_error(read):
    """accelerate's RuntimeError is raised from mp.spawn's wrapper, which carries the original:
    the original is the root, printed once as far as `others` goes."""
    root = read(NOTEBOOK_LAUNCHER)
    assert root.exception == "ValueError" and root.line_number == 16
    assert root.user_frame.file == "/tmp/ipykernel_51/2203741447.py" and root.package == "torch"
    assert [(c.relation, c.exception) for c in root.chain] == [
        (Relation.WRAPPER, "torch.multiprocessing.spawn.ProcessRaisedException"),
        (Relation.CAUSE, "RuntimeError"),
    ]
    assert root.others == 0


def test_mp_spawn_exit_without_a_traceback_is_a_launcher_report():
    root = as_message(MP_EXITED)
    assert root.kind is RootKind.LAUNCHER and root.signal == "SIGKILL"
    assert root.exception == "torch.multiprocessing.spawn.ProcessExitedException"
    assert root.user_frame.file == "/work/ddp.py"


LIGHTNING = """\
Traceback (most recent call last):
  File "/home/sam/vae/main.py", line 58, in <module>
    trainer.fit(model, datamodule=dm)
  File "/home/sam/miniforge3/envs/vae/lib/python3.11/site-packages/lightning/pytorch/trainer/trainer.py", line 538, in fit
    call._call_and_handle_interrupt(
  File "/home/sam/miniforge3/envs/vae/lib/python3.11/site-packages/lightning/pytorch/trainer/call.py", line 47, in _call_and_handle_interrupt
    return trainer_fn(*args, **kwargs)
  File "/home/sam/miniforge3/envs/vae/lib/python3.11/site-packages/lightning/pytorch/loops/training_epoch_loop.py", line 250, in advance
    batch_output = self.automatic_optimization.run(trainer.optimizers[0], batch_idx, kwargs)
  File "/home/sam/miniforge3/envs/vae/lib/python3.11/site-packages/lightning/pytorch/strategies/strategy.py", line 391, in training_step
    return self.lightning_module.training_step(*args, **kwargs)
  File "/home/sam/vae/model.py", line 44, in training_step
    kl = self.kl_weight * kl_div.sum() / n_valid
  File "/home/sam/miniforge3/envs/vae/lib/python3.11/site-packages/torch/_tensor.py", line 41, in wrapped
    return f(*args, **kwargs)
ZeroDivisionError: float division by zero
"""

TRAINER = """\
{'loss': 2.3012, 'grad_norm': 1.77, 'learning_rate': 4.9e-05, 'epoch': 0.12}
Traceback (most recent call last):
  File "C:\\Users\\dev\\proj\\sft.py", line 71, in <module>
    trainer.train()
  File "C:\\Users\\dev\\anaconda3\\envs\\llm\\Lib\\site-packages\\transformers\\trainer.py", line 2241, in train
    return inner_training_loop(
  File "C:\\Users\\dev\\anaconda3\\envs\\llm\\Lib\\site-packages\\transformers\\trainer.py", line 3485, in training_step
    loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
  File "C:\\Users\\dev\\proj\\sft.py", line 40, in compute_loss
    labels = inputs.pop("labels")
KeyError: 'labels'
"""


@BOTH
def test_lightning_and_trainer_reraise_the_original(read):
    root = read(LIGHTNING)
    assert root.exception == "ZeroDivisionError" and root.package == "torch"
    assert root.user_frame.function == "training_step" and root.user_frame.line == 44
    assert root.user_frame.code == "kl = self.kl_weight * kl_div.sum() / n_valid"
    assert [f.package for f in root.frames] == [
        "",
        "lightning",
        "lightning",
        "lightning",
        "lightning",
        "",
        "torch",
    ]
    assert root.chain == ()
    root = read(TRAINER)
    assert (root.exception, root.message) == ("KeyError", "'labels'")
    assert root.frame.file == "C:\\Users\\dev\\proj\\sft.py" and root.raised_in is Origin.USER
    assert root.frames[1].package == "transformers"


TORCHRUN_ERROR_FILE = """\
W1123 03:01:47.865000 4238 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1
E1123 03:02:10.112000 4238 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 4301) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
pretrain.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-23_03:02:09
  host      : gpu-node-7
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4301)
  error_file: /tmp/torchelastic_ab12/none_cd34/attempt_0/0/error.json
  traceback : Traceback (most recent call last):
    File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper
      return f(*args, **kwargs)
    File "/workspace/pretrain.py", line 120, in main
      tokenizer = load_tokenizer(args.tokenizer_dir)
    File "/workspace/pretrain.py", line 33, in load_tokenizer
      with open(os.path.join(path, "vocab.json")) as fh:
  FileNotFoundError: [Errno 2] No such file or directory: '/data/tok/vocab.json'

============================================================
"""

TORCHRUN_SIGKILL = """\
[rank1]: step 1200 loss 2.113
E1123 03:05:10.001000 9841 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 1 (pid: 9875) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-23_03:05:09
  host      : gpu-node-7
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 9875)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 9875
============================================================
"""


@BOTH
def test_torchrun_summary_gives_the_error_file_traceback(read):
    """The child's traceback is only in the summary (from its error file): it is the root, at
    its own line in the log, and torchrun's report and ChildFailedError are its wrappers."""
    root = read(TORCHRUN_ERROR_FILE)
    assert root.exception == "FileNotFoundError" and root.line_number == 29
    assert (
        root.line
        == "FileNotFoundError: [Errno 2] No such file or directory: '/data/tok/vocab.json'"
    )
    assert (root.user_frame.file, root.user_frame.line) == ("/workspace/pretrain.py", 33)
    assert root.frame == root.user_frame and root.frames[0].package == "torch"
    assert [(c.wrapper, c.relation, c.line_number) for c in root.chain] == [
        ("torchrun", Relation.WRAPPER, 2),  # the agent's "failed (exitcode: 1)"
        ("torchrun", Relation.WRAPPER, 8),  # ChildFailedError
    ]
    assert root.chain[1].message == "pretrain.py FAILED"
    assert root.others == 0


@BOTH
def test_torchrun_summary_alone_is_rooted_at_its_signal_line(read):
    """Only torchrun's summary (the agent's own line cut from the log): its "Signal 9 (SIGKILL)
    received by PID" line says how the rank ended, more than its exit code does."""
    summary = TORCHRUN_SIGKILL[TORCHRUN_SIGKILL.index("Traceback") :]
    root = read(summary)
    assert (root.signal, root.exit_code) == ("SIGKILL", -9)
    assert root.line == "traceback : Signal 9 (SIGKILL) received by PID 9875"


@BOTH
def test_torchrun_with_no_traceback_is_a_launcher_report(read):
    root = read(TORCHRUN_SIGKILL)
    assert root.kind is RootKind.LAUNCHER and root.exception == ""
    assert (root.signal, root.exit_code, root.line_number) == ("SIGKILL", -9, 2)
    assert "failed (exitcode: -9) local_rank: 1" in root.line
    assert root.chain[0].exception.endswith("ChildFailedError")


@BOTH
def test_a_device_side_assert_is_rooted_at_the_kernels_assertion_line(read):
    """The kernel's printf reaches the log after the traceback (flushed at the next sync): the
    root's line is the assertion, which names the kernel's file and condition."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/seg.py", line 30, in <module>\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss2d_forward_kernel: block: [3,0,0], "
        "thread: [7,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    root = read(log)
    assert root.kind is RootKind.EXCEPTION and root.exception == "RuntimeError"
    assert root.line_number == 5 and "Assertion `t >= 0 && t < n_classes` failed." in root.line
    assert root.user_frame is not None and root.user_frame.file == "/home/u/seg.py"


JIT_BUILD = """\
Emitting ninja build file /root/.cache/torch_extensions/py311_cu121/fused/build.ninja...
Building extension module fused...
[1/2] /usr/local/cuda/bin/nvcc -c /src/fused.cu -o fused.cuda.o
FAILED: fused.cuda.o
/src/fused.cu(41): error: identifier "__hmax2" is undefined
/src/fused.cu(57): error: identifier "__hmin2" is undefined
2 errors detected in the compilation of "/src/fused.cu".
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
  File "/opt/env/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2100, in _run_ninja_build
    subprocess.run(
  File "/usr/lib/python3.11/subprocess.py", line 571, in run
    raise CalledProcessError(retcode, process.args,
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/u/train.py", line 3, in <module>
    fused = load(name="fused", sources=["fused.cu"])
RuntimeError: Error building extension 'fused'
"""


@BOTH
@pytest.mark.parametrize(
    "first",
    [
        '/src/fused.cu(41): error: identifier "__hmax2" is undefined',  # nvcc
        "/src/ops.cpp:41:12: fatal error: cuda_runtime.h: No such file or directory",  # gcc
        "C:\\src\\ops.cpp(41): error C2065: 'ssize_t': undeclared identifier",  # MSVC
    ],
)
def test_a_build_fails_at_its_first_compiler_error(read, first):
    """An extension build: the compiler's first error is the root, not the build tool's stop,
    setuptools' or ninja's CalledProcessError, nor torch's "Error building extension"."""
    log = JIT_BUILD.replace('/src/fused.cu(41): error: identifier "__hmax2" is undefined', first)
    root = read(log)
    assert root.kind is RootKind.BUILD and root.line_number == 5 and root.line == first


@BOTH
def test_a_build_tool_stop_is_the_root_when_the_compiler_output_is_not_shown(read):
    log = "\n".join(ln for ln in JIT_BUILD.splitlines() if "error:" not in ln) + "\n"
    root = read(log)
    assert root.kind is RootKind.BUILD and root.line == "ninja: build stopped: subcommand failed."


@BOTH
def test_the_interpreter_that_cannot_open_the_script_is_the_root(read):
    """CPython's own message when the script on the command line does not exist (no traceback;
    it exits 2), printed by each rank: the root, before torchrun's report of the exit."""
    log = (
        "W1126 launching 2 processes\n"
        "/opt/env/bin/python3.11: can't open file '/srv/exp/trian.py': [Errno 2] No such file "
        "or directory\n"
        "/opt/env/bin/python3.11: can't open file '/srv/exp/trian.py': [Errno 2] No such file "
        "or directory\n"
        "E1126 12:00:01.000000 77 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: 2) local_rank: 0 (pid: 78) of binary: /opt/env/bin/python3.11\n"
    )
    root = read(log)
    assert root.kind is RootKind.EXIT_STATUS and root.exit_code == 2
    assert root.line_number == 2 and "can't open file '/srv/exp/trian.py'" in root.line


ACCELERATE = """\
Traceback (most recent call last):
  File "/home/u/run_clm.py", line 210, in <module>
    main()
  File "/home/u/run_clm.py", line 98, in main
    assert args.block_size % 8 == 0, "block_size must be a multiple of 8"
AssertionError: block_size must be a multiple of 8
Traceback (most recent call last):
  File "/home/u/.local/bin/accelerate", line 8, in <module>
    sys.exit(main())
  File "/home/u/.local/lib/python3.10/site-packages/accelerate/commands/launch.py", line 1022, in simple_launcher
    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)
subprocess.CalledProcessError: Command '['/usr/bin/python3', 'run_clm.py', '--block_size', '100']' returned non-zero exit status 1.
"""


@BOTH
def test_a_launcher_subprocess_error_is_a_wrapper(read):
    root = read(ACCELERATE)
    assert root.exception == "AssertionError" and root.line_number == 6
    assert (
        root.user_frame.code
        == 'assert args.block_size % 8 == 0, "block_size must be a multiple of 8"'
    )
    assert [(c.wrapper, c.line_number) for c in root.chain] == [("subprocess", 12)]
    assert root.others == 0


def test_a_subprocess_error_alone_is_the_root():
    root = as_message(ACCELERATE.split("AssertionError: block_size must be a multiple of 8\n")[1])
    assert root.kind is RootKind.LAUNCHER and root.exit_code == 1
    assert root.exception == "subprocess.CalledProcessError"
    assert root.frames[0].package == "accelerate"  # the console script pip wrote


# ---------------------------------------------------------------- several processes, many failures
INTERLEAVED = """\
[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File "/work/train.py", line 50, in <module>
[rank1]:   File "/work/train.py", line 50, in <module>
[rank0]:     run(cfg)
[rank1]:     run(cfg)
[rank1]:   File "/work/train.py", line 31, in run
[rank1]:     batch = next(it)
[rank1]:   File "/work/data.py", line 12, in __next__
[rank1]:     return self.items[self.i]
[rank1]: IndexError: list index out of range
[rank0]:   File "/work/train.py", line 35, in run
[rank0]:     dist.all_reduce(t)
[rank0]:   File "/usr/lib/python3/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
[rank0]:     return func(*args, **kwargs)
[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:41562
"""


@BOTH
def test_interleaved_ranks_keep_their_own_frames(read):
    root = read(INTERLEAVED)
    assert (root.exception, root.rank, root.line_number) == ("IndexError", 1, 11)
    assert [(f.file, f.line) for f in root.frames] == [
        ("/work/train.py", 50),
        ("/work/train.py", 31),
        ("/work/data.py", 12),
    ]
    assert root.others == 1  # rank 0's RuntimeError


def test_a_consequence_is_never_the_root_while_something_else_failed():
    """Rank 0's timeout is printed before rank 1's own error; a classifier of consequences (the
    job view's) makes rank 1's error the root, and with only timeouts the first is named as one."""
    log = (
        "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting 1800000ms for recv operation to complete\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )

    def consequence(text: str) -> str | None:
        return "timeout" if "Timed out waiting" in text else None

    root = find_root(scan_text(log), consequence=consequence)
    assert (root.exception, root.rank, root.others) == ("torch.OutOfMemoryError", 1, 1)
    assert find_root(scan_text(log)).rank == 0  # without one, the first printed
    only = find_root(scan_text(log.splitlines()[0]), consequence=consequence)
    assert only.consequence == "timeout" and only.exception == "RuntimeError"
    # A peer's death by SIGKILL (the launcher's report) outranks the survivors' consequences;
    # a SIGTERM the launcher sent does not.
    killed = (
        log.splitlines()[0] + "\n"
        "E1123 03:05:10.001000 9841 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: {code}) local_rank: 1 (pid: 9875) of binary: /usr/bin/python3\n"
    )
    root = find_root(scan_text(killed.format(code=-9)), consequence=consequence)
    assert root.kind is RootKind.LAUNCHER and root.signal == "SIGKILL" and root.line_number == 2
    root = find_root(scan_text(killed.format(code=-15)), consequence=consequence)
    assert root.consequence == "timeout" and root.line_number == 1


def test_many_tracebacks_first_failure_and_how_many_others():
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/eval.py", line {n}, in score\n'
        "    acc = correct / total\n"
        "ZeroDivisionError: division by zero\n"
    )
    log = "".join(tb.format(n=n) for n in range(10, 14))
    log += "ValueError: could not convert string to float: 'nan%'\n"
    root = as_message(log)
    assert root.exception == "ZeroDivisionError" and root.frame.line == 10
    assert root.others == 1  # the same ZeroDivisionError again is not another failure


def test_a_cut_traceback_still_gives_what_is_there():
    cut = """\
    x = self.proj(x)
  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", line 125, in forward
    return F.linear(input, self.weight, self.bias)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x512 and 768x10)
"""
    root = as_message(cut)
    assert root.exception == "RuntimeError" and root.truncated
    assert root.package == "torch" and root.user_frame is None
    only_frames = 'Traceback (most recent call last):\n  File "/x/train.py", line 3, in <module>\n    main()\n'
    root = as_message(only_frames)
    assert root.truncated and root.exception == "" and root.frames[0].file == "/x/train.py"


def test_an_ignored_exception_is_no_failure():
    log = """\
Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3b2c1d0e50>
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1479, in __del__
    self._shutdown_workers()
AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_workers_status'
"""
    assert as_message(log) is None
    assert as_message(log + "KeyboardInterrupt\n").exception == "KeyboardInterrupt"


def test_no_failure_no_root():
    log = (
        "/usr/lib/python3/dist-packages/torch/nn/modules/transformer.py:307: UserWarning: "
        "enable_nested_tensor is True\n"
        "  warnings.warn(\n"
        "Epoch 1/3 loss 0.51\nProcess finished with exit code 0\n"
    )
    assert as_message(log) is None
    assert as_stream(log) is None


# ---------------------------------------------------------------- failures with no exception
@pytest.mark.parametrize(
    ("line", "kind", "signal", "code"),
    [
        ("Killed", RootKind.SIGNAL, "SIGKILL", None),
        (
            "/var/spool/slurmd/job4411/slurm_script: line 19: 80721 Killed                  python train.py --bs 64",
            RootKind.SIGNAL,
            "SIGKILL",
            None,
        ),
        ("Segmentation fault (core dumped)", RootKind.SIGNAL, "SIGSEGV", None),
        ("zsh: bus error  python infer.py", RootKind.SIGNAL, "SIGBUS", None),
        ("段错误 (核心已转储)", RootKind.SIGNAL, "SIGSEGV", None),
        ("srun: error: gpu-a17: task 3: Killed", RootKind.LAUNCHER, "SIGKILL", None),
        ("srun: error: gpu-a17: task 0: Exited with exit code 2", RootKind.LAUNCHER, "", 2),
        (
            "slurmstepd: error: *** JOB 771023 ON gpu-a17 CANCELLED AT 2024-05-02T11:00:04 DUE TO TIME LIMIT ***",
            RootKind.LAUNCHER,
            "",
            None,
        ),
        (
            "slurmstepd: error: Detected 1 oom_kill event in StepId=771023.batch. Some of the step tasks have been OOM Killed.",
            RootKind.KERNEL,
            "",
            None,
        ),
        (
            "[Thu May  2 11:00:04 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=80721, name=python, GPU has fallen off the bus.",
            RootKind.KERNEL,
            "",
            None,
        ),
        (
            "[81232.101] Out of memory: Killed process 80721 (python) total-vm:98123456kB, anon-rss:65536000kB",
            RootKind.KERNEL,
            "",
            None,
        ),
        (
            "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)",
            RootKind.SIGNAL,
            "SIGKILL",
            137,
        ),
        ("Error: Process completed with exit code 1.", RootKind.EXIT_STATUS, "", 1),
        (
            "[2024-05-02 11:00:04,001] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 80721\n"
            "[2024-05-02 11:00:04,002] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py'] exits with return code = -11",
            RootKind.LAUNCHER,
            "SIGSEGV",
            -11,
        ),
    ],
)
def test_signals_exit_statuses_launchers_and_the_kernel(line, kind, signal, code):
    log = "step 100 loss 1.93\nstep 200 loss 1.88\n" + line + "\n"
    for read in (as_message, as_stream):
        root = read(log)
        assert root is not None, (read, line)
        assert (root.kind, root.signal, root.exit_code) == (kind, signal, code), (read, line)
        assert root.line in line.splitlines()[-1] and root.exception == ""
        assert root.frame is None and root.raised_in is None


def test_a_fatal_python_error_has_faulthandler_frames():
    log = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f5e2a1ff740 (most recent call first):
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 2264 in embedding
  File "/home/r/lm/model.py", line 18 in forward
  File "/home/r/lm/run.py", line 7 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
Segmentation fault (core dumped)
"""
    root = as_message(log)
    assert (root.kind, root.signal, root.line_number) == (RootKind.SIGNAL, "SIGSEGV", 1)
    assert root.frame.function == "embedding" and root.package == "torch"
    assert root.user_frame.file == "/home/r/lm/model.py"
    assert [f.line for f in root.frames] == [7, 18, 2264]  # outermost first, as a traceback
    assert root.chain == () and root.others == 0  # the shell's report of the same crash


def test_a_cxx_exception_reads_its_what_line():
    log = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: misaligned address\n"
        "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43\n"
        "Aborted (core dumped)\n"
    )
    root = as_message(log)
    assert (root.exception, root.message, root.line_number) == (
        "c10::Error",
        "CUDA error: misaligned address",
        2,
    )


# ---------------------------------------------------------------- frames and packages
@pytest.mark.parametrize(
    ("path", "origin", "package"),
    [
        (
            "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py",
            Origin.PACKAGE,
            "torch",
        ),
        ("/usr/lib/python3/dist-packages/yaml/constructor.py", Origin.PACKAGE, "yaml"),
        (
            "/opt/conda/envs/ml/lib/python3.9/site-packages/transformers/trainer.py",
            Origin.PACKAGE,
            "transformers",
        ),
        (
            "/home/u/proj/.venv/lib/python3.12/site-packages/datasets/load.py",
            Origin.PACKAGE,
            "datasets",
        ),
        (
            "C:\\Users\\u\\miniconda3\\envs\\cv\\Lib\\site-packages\\cv2\\__init__.py",
            Origin.PACKAGE,
            "cv2",
        ),
        ("/usr/lib/python3/dist-packages/six.py", Origin.PACKAGE, "six"),
        (
            "/opt/conda/lib/python3.8/site-packages/detectron2-0.6-py3.8-linux-x86_64.egg/detectron2/data/build.py",
            Origin.PACKAGE,
            "detectron2",
        ),
        ("/usr/lib/python3.10/json/decoder.py", Origin.STDLIB, "json"),
        (
            "/opt/conda/envs/ml/lib/python3.9/multiprocessing/process.py",
            Origin.STDLIB,
            "multiprocessing",
        ),
        ("C:\\Program Files\\Python311\\Lib\\json\\decoder.py", Origin.STDLIB, "json"),
        ("C:\\Users\\u\\anaconda3\\lib\\shutil.py", Origin.STDLIB, "shutil"),
        ("<frozen importlib._bootstrap>", Origin.STDLIB, "importlib"),
        ("<frozen runpy>", Origin.STDLIB, "runpy"),
        ("/usr/local/bin/torchrun", Origin.PACKAGE, "torchrun"),
        ("/home/u/proj/lib/json_utils.py", Origin.USER, ""),
        ("/workspace/src/mypkg/model.py", Origin.USER, ""),
        ("<ipython-input-4-0c8d7f5e1c2b>", Origin.USER, ""),
        ("D:\\work\\train.py", Origin.USER, ""),
    ],
)
def test_package_of_a_frame(path, origin, package):
    assert package_of(path) == (origin, package)


def test_user_frame_is_the_users_frame_nearest_the_failure():
    log = """\
Traceback (most recent call last):
  File "/home/u/app/cli.py", line 9, in <module>
    main()
  File "/home/u/app/cli.py", line 5, in main
    cfg = load("cfg.json")
  File "/home/u/app/config.py", line 22, in load
    return json.load(fh)
  File "/usr/lib/python3.11/json/__init__.py", line 293, in load
    return loads(fp.read(),
  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""
    root = as_message(log)
    assert root.raised_in is Origin.STDLIB and root.package == "json"
    assert (root.user_frame.file, root.user_frame.line, root.user_frame.function) == (
        "/home/u/app/config.py",
        22,
        "load",
    )


# ---------------------------------------------------------------- a long log
def long_log() -> str:
    """5,000 lines: training progress, the root at line 4,000 (a FileNotFoundError with its
    traceback), then a cascade: the other ranks' timeouts and the launcher's report."""
    lines = [f"step {i} loss {2.0 - i / 5000:.4f} lr 3.0e-04" for i in range(1, 3994)]
    lines += [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 211, in <module>',
        "    evaluate(model, cfg.eval_dir)",
        '  File "/workspace/evaluate.py", line 40, in evaluate',
        '    with open(os.path.join(root, "labels.txt")) as fh:',
        "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/eval/labels.txt'",
    ]
    assert len(lines) == 4000
    seq = 4000
    while len(lines) < 5000:
        seq += 1
        r = seq % 7 + 1
        why = (
            f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group watchdog thread terminated "
            f"with exception: [Rank {r}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600012 milliseconds before timing out."
        )
        lines += [
            f"[rank{r}]:[E1123 03:14:{seq % 60:02d}.0 ProcessGroupNCCL.cpp:1595] {why}",
            f"[rank{r}]: terminate called after throwing an instance of 'c10::DistBackendError'",
            f"[rank{r}]:   what():  {why}",
        ]
    return "\n".join(lines[:5000]) + "\n"


def test_five_thousand_lines_root_at_line_4000():
    log = long_log()
    assert log.count("\n") == 5000
    for read in (as_stream, as_message):
        root = read(log)
        assert root.line_number == 4000 and root.exception == "FileNotFoundError", read
        assert root.message == "[Errno 2] No such file or directory: '/data/eval/labels.txt'"
        assert root.user_frame.file == "/workspace/evaluate.py" and root.user_frame.line == 40
        assert root.others == 7  # the cascade: each rank's watchdog teardown, once


def test_root_in_the_skimmed_middle_of_a_huge_log_keeps_its_frames():
    """A log of ~40 MiB: its middle is only skimmed for error lines; the exception line kept
    there brings its traceback with it."""
    filler = b"".join(b"step %d loss 1.2345 lr 3e-4 tokens/s 51234\n" % i for i in range(200_000))
    tb = (
        b"Traceback (most recent call last):\n"
        b'  File "/w/train.py", line 88, in <module>\n'
        b"    trainer.step(batch)\n"
        b'  File "/w/.venv/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 2213, in step\n'
        b"    self._take_model_step(lr_kwargs)\n"
        b"AssertionError: no_sync context manager is incompatible with gradient partitioning\n"
    )

    def chunks():
        for _ in range(3):
            yield filler
        yield tb
        for _ in range(2):
            yield filler

    s = scan(chunks())
    assert s.skimmed > 0
    root = find_root(s)
    assert root.exception == "AssertionError" and root.package == "deepspeed"
    assert root.user_frame.file == "/w/train.py" and root.line_number == 600_006


# ---------------------------------------------------------------- the record's JSON
def test_json_shape():
    d = as_message(MP_SPAWN).to_dict()
    json.dumps(d)  # plain values only
    assert {
        "kind",
        "line",
        "line_number",
        "exception",
        "message",
        "frame",
        "raised_in",
        "package",
        "user_frame",
        "frames",
        "chain",
        "signal",
        "exit_code",
        "others",
    } <= set(d)
    assert d["kind"] == "exception" and d["raised_in"] == "package" and d["package"] == "torch"
    assert d["frame"]["origin"] == "package" and d["user_frame"]["origin"] == "user"
    assert d["chain"][0] == {
        "relation": "wrapper",
        "exception": "torch.multiprocessing.spawn.ProcessRaisedException",
        "line": "torch.multiprocessing.spawn.ProcessRaisedException:",
        "line_number": 10,
        "message": "",
        "wrapper": "mp.spawn",
    }


# ---------------------------------------------------------------- IPython, pastes, mentions
IPYTHON_7 = """\
---------------------------------------------------------------------------
KeyError                                  Traceback (most recent call last)
<ipython-input-7-4f66baab8f93> in <module>
----> 1 prices = load_prices(cfg)

~/notebooks/shop/loader.py in load_prices(cfg)
     10     rows = []
     11     for r in read_rows(cfg):
---> 12         rows.append(r[cfg["column"]])
     13     return rows

KeyError: 'price'
"""

IPYTHON_8 = """\
---------------------------------------------------------------------------
ZeroDivisionError                         Traceback (most recent call last)
Cell In[3], line 2
      1 hits = 0
----> 2 rate = hits / total_seen(log)

File ~/notebooks/metrics.py:7, in total_seen(log)
      5 def total_seen(log):
      6     n = sum(1 for e in log if e.seen)
----> 7     return 1 / n

ZeroDivisionError: division by zero
"""


def test_ipython_tracebacks():
    root = as_message(IPYTHON_7)
    assert (root.exception, root.message, root.line_number) == ("KeyError", "'price'", 12)
    assert [(f.file, f.line, f.function) for f in root.frames] == [
        ("<ipython-input-7-4f66baab8f93>", 1, "<module>"),
        ("~/notebooks/shop/loader.py", 12, "load_prices"),
    ]
    assert root.frame.code == 'rows.append(r[cfg["column"]])'
    root = as_message(IPYTHON_8)
    assert root.exception == "ZeroDivisionError" and root.line_number == 12
    assert [(f.file, f.line) for f in root.frames] == [
        ("Cell In[3]", 2),
        ("~/notebooks/metrics.py", 7),
    ]
    assert root.frame.code == "return 1 / n"
    # Cut before its last line: IPython's header still names the exception.
    root = as_message(IPYTHON_7.split("\nKeyError: 'price'")[0])
    assert root.exception == "KeyError" and root.truncated and root.line_number == 2


def test_a_paste_that_lost_its_indentation():
    log = """\
Traceback (most recent call last):
File "/root/proj/train.py", line 58, in <module>
main()
File "/root/proj/train.py", line 40, in main
batch = next(loader_iter)
File "/root/miniconda3/envs/x/lib/python3.10/queue.py", line 180, in get
self.not_empty.wait(remaining)
RuntimeError: DataLoader worker (pid 108439) is killed by signal: Killed.
"""
    root = as_message(log)
    assert root.exception == "RuntimeError" and root.signal == "SIGKILL"
    assert [f.code for f in root.frames] == [
        "main()",
        "batch = next(loader_iter)",
        "self.not_empty.wait(remaining)",
    ]
    assert root.package == "queue" and root.raised_in is Origin.STDLIB


def test_an_exception_named_in_passing_when_nothing_else_shows():
    flat = (
        'Traceback (most recent call last):   File "train.py", line 29, in <module>     '
        'ds = ImageFolder(root=path)   File "/usr/lib/python3/dist-packages/torchvision/datasets/folder.py", '
        "line 23, in find_classes FileNotFoundError: [Errno 2] No such file or directory: 'background'"
    )
    root = as_message("Running python3 train.py gives the following error:\n" + flat + "\n")
    assert root.exception == "FileNotFoundError" and root.line == flat and root.line_number == 2
    assert root.message == "[Errno 2] No such file or directory: 'background'"
    said = "but I got an error \" PermissionError: [Errno 13] Permission denied: 'archive' \""
    assert as_message("I ran main.py\n" + said + "\n").exception == "PermissionError"
    # A real exception line wins over one named in a sentence before it.
    root = as_message("I keep seeing ValueError: bad shape in my runs\nKeyError: 'lr'\n")
    assert root.exception == "KeyError" and root.others == 0


# ---------------------------------------------------------------- through the engine and the CLI
UNKNOWN_TB = """\
step 10 loss 2.41
Traceback (most recent call last):
  File "/srv/job/run.py", line 20, in <module>
    sched = make_schedule(cfg)
  File "/srv/job/sched.py", line 8, in make_schedule
    return SCHEDULES[cfg.name](cfg)
  File "/srv/job/sched.py", line 3, in <lambda>
    "cosine": lambda c: c.warmup // c.cycles,
ZeroDivisionError: integer division or modulo by zero
"""


@pytest.fixture
def cli(capsys, monkeypatch):
    from kb.cli.main import main

    monkeypatch.setenv("NO_COLOR", "1")

    def run(*argv):
        rc = main(list(argv))
        return rc, capsys.readouterr().out

    return run


def test_the_engine_sets_root_on_every_lookup():
    import kb

    engine = default_engine()
    r = engine.lookup(MP_SPAWN)
    assert isinstance(r.root, kb.RootFailure) and r.root.exception == "FileNotFoundError"
    assert engine.lookup("training finished, 3 epochs").root is None
    assert engine.lookup(MP_SPAWN, top=1).root == r.root
    assert engine.lookup_scan(scan_text(MP_SPAWN), root=False).root is None


def test_cli_text_json_markdown_jsonl_github(cli, tmp_path):
    from kb import exit_codes

    log = tmp_path / "job.log"
    log.write_text(UNKNOWN_TB)
    rc, out = cli("lookup", str(log))
    matched = rc == exit_codes.OK
    if not matched:  # no entry knows it: the root failure first, marked, never a diagnosis
        assert rc == exit_codes.ROOT_ONLY
        assert out.startswith("root failure  ZeroDivisionError  (not in the knowledge base)\n")
        assert "  line 9      ZeroDivisionError: integer division or modulo by zero" in out
        assert "your code   /srv/job/sched.py:3 in <lambda>" in out
        assert "not a diagnosis" in out and "Likely causes" not in out and "confidence" not in out
    rc, out = cli("lookup", "--json", str(log))
    d = json.loads(out)
    assert d["root"]["line_number"] == 9 and d["root"]["exception"] == "ZeroDivisionError"
    assert d["root"]["user_frame"]["file"] == "/srv/job/sched.py"
    assert all("generic" in m for m in d["matches"])
    rc, out = cli("lookup", "--format", "jsonl", str(log))
    assert (
        json.loads(out)["root"]["line"] == "ZeroDivisionError: integer division or modulo by zero"
    )
    rc, out = cli("lookup", "--format", "markdown", str(log))
    assert "ZeroDivisionError: integer division or modulo by zero" in out
    if not matched:
        assert "not in the knowledge base" in out
        rc, out = cli("lookup", "--format", "github", str(log))
        assert out.startswith("::warning ") and "root failure, not in the knowledge base" in out
        assert "ZeroDivisionError: integer division or modulo by zero" in out


def test_cli_unknown_exception_exit_code_and_nothing_found(cli):
    from kb import exit_codes

    rc, out = cli("lookup", "pipeline.StageError: stage 'tokenize' produced no shards")
    assert rc == exit_codes.ROOT_ONLY == 4
    assert out.startswith("root failure  pipeline.StageError  (not in the knowledge base)")
    rc, out = cli(
        "lookup", "--format", "github", "pipeline.StageError: stage 'tokenize' produced no shards"
    )
    assert rc == 4 and out.startswith("::warning title=kb%3A pipeline.StageError (root failure")
    rc, out = cli("lookup", "all 3 epochs finished")
    assert rc == exit_codes.NOT_FOUND == 1 and out.startswith("no known entry for this input")
    rc, out = cli("lookup", "--json", "all 3 epochs finished")
    assert rc == 1 and json.loads(out)["root"] is None


def test_cli_a_match_shows_the_root_line_when_it_is_another_line(cli):
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/job/warmup.py", line 4, in <module>\n'
        "    plan = planner.compile(graph)\n"
        "pipeline.PlanError: node 'fuse_17' has no inputs\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    rc, out = cli("lookup", log)
    assert rc == 0 and out.startswith("cuda-illegal-memory-access")
    assert "  root        line 4: pipeline.PlanError: node 'fuse_17' has no inputs" in out
    rc, out = cli("lookup", "--format", "markdown", log)
    assert "The log's first failure, line 4 (no entry matched it):" in out


def test_cli_a_generic_entry_exits_0_and_says_generic(cli):
    rc, out = cli(
        "lookup",
        "--json",
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'",
    )
    d = json.loads(out)
    if not d["matches"]:
        pytest.skip("no generic entry claims a missing file in this knowledge base")
    assert rc == 0 and d["matches"][0]["generic"] is True
    assert d["root"]["exception"] == "FileNotFoundError"


def test_cli_five_thousand_lines(cli, tmp_path):
    log = tmp_path / "long.log"
    log.write_text(long_log())
    _, out = cli("lookup", "--json", str(log))
    d = json.loads(out)
    assert d["root"]["line_number"] == 4000 and d["root"]["exception"] == "FileNotFoundError"
    assert d["root"]["user_frame"]["line"] == 40
