"""Ordinary program output that must never be read as a metric log, whatever its numbers look like.

Each text is real output: pip, the accelerate launcher, a Python traceback and the wandb files were
captured by running the tools (`pip install --dry-run requests==2.31.0`; `accelerate launch --cpu
hello.py` and `accelerate env` from accelerate 1.15 without psutil; `WANDB_MODE=offline python -c
"import wandb; r=wandb.init(project='x', dir='/tmp/wb'); r.log({'a':1}); r.finish()"` with wandb 0.31);
the DeepSpeed lines are quoted from issue threads, named beside them.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stabdiag
from stabdiag.errors import InputError
from stabdiag.read.formats import loader_for
from stabdiag.read.formats import text as textlog

PIP_DRY_RUN = (
    'Looking in indexes: https://pypi.org/simple, file:///opt/pypi/simple, file:///opt/pypi-more/simple\n'
    'Looking in links: /opt/wheels\n'
    "WARNING: Location 'file:///opt/pypi-more/simple/requests/' is ignored: it is neither a file nor a director"
    'y.\n'
    'Collecting requests==2.31.0\n'
    '  Downloading requests-2.31.0-py3-none-any.whl (62 kB)\n'
    '     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 62.6/62.6 kB 80.8 MB/s eta 0:00:00\n'
    'Requirement already satisfied: charset-normalizer<4,>=2 in /work/main/.venv/lib/python3.11/site-packages ('
    'from requests==2.31.0) (3.5.3)\n'
    'Requirement already satisfied: idna<4,>=2.5 in /work/main/.venv/lib/python3.11/site-packages (from request'
    's==2.31.0) (3.20)\n'
    'Requirement already satisfied: urllib3<3,>=1.21.1 in /work/main/.venv/lib/python3.11/site-packages (from r'
    'equests==2.31.0) (2.8.0)\n'
    'Requirement already satisfied: certifi>=2017.4.17 in /work/main/.venv/lib/python3.11/site-packages (from r'
    'equests==2.31.0) (2026.10.19.post1)\n'
    'Would install requests-2.31.0\n'
)

ACCELERATE_LAUNCH = (
    'The following values were not passed to `accelerate launch` and had defaults used instead:\n'
    '\t`--num_processes` was set to a value of `0`\n'
    '\t`--num_machines` was set to a value of `1`\n'
    "\t`--mixed_precision` was set to a value of `'no'`\n"
    "\t`--dynamo_backend` was set to a value of `'no'`\n"
    'To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.\n'
    'hello from rank\n'
)

TRACEBACK = (
    'Traceback (most recent call last):\n'
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "<frozen runpy>", line 88, in _run_code\n'
    '  File "/tmp/accel/accelerate/commands/accelerate_cli.py", line 18, in <module>\n'
    '    from accelerate.commands.env import env_command_parser\n'
    '  File "/tmp/accel/accelerate/commands/env.py", line 24, in <module>\n'
    '    import psutil\n'
    "ModuleNotFoundError: No module named 'psutil'\n"
)

WANDB_DEBUG = (
    '2026-11-30 19:46:18,859 INFO    MainThread:6970 [wandb_setup.py:_flush():81] Current SDK version is 0.31.0'
    '\n'
    '2026-11-30 19:46:18,859 INFO    MainThread:6970 [wandb_setup.py:_flush():81] Configure stats pid to 6970\n'
    '2026-11-30 19:46:18,859 INFO    MainThread:6970 [wandb_setup.py:_flush():81] Loading settings from environ'
    'ment variables\n'
    '2026-11-30 19:46:18,859 INFO    MainThread:6970 [wandb_init.py:setup_run_log_directory():740] Logging user'
    ' logs to /tmp/wb/wandb/offline-run-20261130_194618-mct90mee/logs/debug.log\n'
    '2026-11-30 19:46:18,859 INFO    MainThread:6970 [wandb_init.py:setup_run_log_directory():741] Logging inte'
    'rnal logs to /tmp/wb/wandb/offline-run-20261130_194618-mct90mee/logs/debug-internal.log\n'
    '2026-11-30 19:46:18,863 INFO    MainThread:6970 [wandb_init.py:init():784] calling init triggers\n'
    '2026-11-30 19:46:18,863 INFO    MainThread:6970 [wandb_init.py:init():789] wandb.init called with sweep_co'
    'nfig: {}\n'
    "config: {'_wandb': {}}\n"
    '2026-11-30 19:46:18,863 INFO    MainThread:6970 [wandb_init.py:init():832] starting backend\n'
    '2026-11-30 19:46:19,068 INFO    MainThread:6970 [wandb_init.py:init():847] sending inform_init request\n'
    '2026-11-30 19:46:19,076 INFO    MainThread:6970 [wandb_init.py:init():852] backend started and connected\n'
    '2026-11-30 19:46:19,106 INFO    MainThread:6970 [wandb_init.py:init():922] updated telemetry\n'
    '2026-11-30 19:46:19,113 INFO    MainThread:6970 [wandb_init.py:init():940] communicating run to backend wi'
    'th 90.0 second timeout\n'
    '2026-11-30 19:46:19,116 INFO    MainThread:6970 [wandb_init.py:init():977] starting run threads in backend'
    '\n'
    '2026-11-30 19:46:19,225 INFO    MainThread:6970 [wandb_run.py:_console_start():2528] atexit reg\n'
    '2026-11-30 19:46:19,225 INFO    MainThread:6970 [wandb_run.py:_redirect():2378] redirect: wrap_raw\n'
    '2026-11-30 19:46:19,225 INFO    MainThread:6970 [wandb_run.py:_redirect():2447] Wrapping output streams.\n'
    '2026-11-30 19:46:19,225 INFO    MainThread:6970 [wandb_run.py:_redirect():2470] Redirects installed.\n'
    '2026-11-30 19:46:19,449 INFO    MainThread:6970 [wandb_init.py:init():1015] run started, returning control'
    ' to user process\n'
    '2026-11-30 19:46:19,450 INFO    MainThread:6970 [wandb_run.py:_finish():2300] finishing run x/mct90mee\n'
    '2026-11-30 19:46:19,451 INFO    MainThread:6970 [wandb_run.py:_atexit_cleanup():2495] got exitcode: 0\n'
    '2026-11-30 19:46:19,451 INFO    MainThread:6970 [wandb_run.py:_restore():2477] restore\n'
    '2026-11-30 19:46:19,451 INFO    MainThread:6970 [wandb_run.py:_restore():2483] restore done\n'
)

WANDB_DEBUG_INTERNAL = (
    '{"time":"2026-11-30T19:46:19.074779182Z","level":"INFO","msg":"wandb-core"}\n'
    '{"time":"2026-11-30T19:46:19.074800083Z","level":"INFO","msg":"stream: starting","core version":"0.31.0"}'
    '\n'
    '{"time":"2026-11-30T19:46:19.074945409Z","level":"INFO","msg":"stream: created new stream","id":"mct90mee"'
    '}\n'
    '{"time":"2026-11-30T19:46:19.075044226Z","level":"INFO","msg":"stream: started"}\n'
    '{"time":"2026-11-30T19:46:19.075706973Z","level":"INFO","msg":"handler: started"}\n'
    '{"time":"2026-11-30T19:46:19.075720003Z","level":"INFO","msg":"writer: started","stream_id":"mct90mee"}\n'
    '{"time":"2026-11-30T19:46:19.075755315Z","level":"INFO","msg":"sender: started"}\n'
    '{"time":"2026-11-30T19:46:19.452927895Z","level":"INFO","msg":"handler: operation stats","stats":{}}\n'
    '{"time":"2026-11-30T19:46:19.456829746Z","level":"INFO","msg":"stream: finishing up"}\n'
    '{"time":"2026-11-30T19:46:19.456836966Z","level":"INFO","msg":"handler: closed"}\n'
    '{"time":"2026-11-30T19:46:19.456857537Z","level":"INFO","msg":"sender: closed"}\n'
    '{"time":"2026-11-30T19:46:19.456861293Z","level":"INFO","msg":"stream: all finished"}\n'
)

WANDB_DEBUG_CORE = (
    '{"time":"2026-11-30T19:46:18.916606105Z","level":"INFO","msg":"main: starting server","port-filename":"/tm'
    'p/tmp_vmb32lc/port-6970.txt","pid":6970,"detached":false,"idle-timeout":600000000000,"log-level":0,"disabl'
    'e-analytics":false,"shutdown-on-parent-exit":false,"enable-dcgm-profiling":false}\n'
    '{"time":"2026-11-30T19:46:18.92002064Z","level":"INFO","msg":"server: accepting connections","addr":{"Name'
    '":"/tmp/wandb-6970-6975-1896645694/socket","Net":"unix"}}\n'
    '{"time":"2026-11-30T19:46:18.920142652Z","level":"INFO","msg":"server: will exit if parent process dies","'
    'ppid":6970}\n'
    '{"time":"2026-11-30T19:46:19.067976652Z","level":"INFO","msg":"connection: ManageConnectionData: new conne'
    'ction created","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.074597501Z","level":"INFO","msg":"handleInformInit: received","streamId":"mct'
    '90mee","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.075047291Z","level":"INFO","msg":"handleInformInit: stream started","streamId'
    '":"mct90mee","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.117911519Z","level":"INFO","msg":"connection: cancelling request","id":"1(@)"'
    ',"requestId":"jzz690r06nn8"}\n'
    '{"time":"2026-11-30T19:46:19.456813451Z","level":"INFO","msg":"handleInformFinish: finish message received'
    '","streamId":"mct90mee","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457573223Z","level":"INFO","msg":"handleInformFinish: stream closed","streamI'
    'd":"mct90mee","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457579482Z","level":"INFO","msg":"handleInformTeardown: server teardown initi'
    'ated","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457593413Z","level":"INFO","msg":"handleInformTeardown: server shutdown compl'
    'ete","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457599422Z","level":"INFO","msg":"connection: closing","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457623678Z","level":"INFO","msg":"connection: closed successfully","id":"1(@)'
    '"}\n'
    '{"time":"2026-11-30T19:46:19.457652982Z","level":"INFO","msg":"processOutgoingData: finished","id":"1(@)"}'
    '\n'
    '{"time":"2026-11-30T19:46:19.457659431Z","level":"INFO","msg":"connection: ManageConnectionData: connectio'
    'n closed","id":"1(@)"}\n'
    '{"time":"2026-11-30T19:46:19.457676657Z","level":"INFO","msg":"server: is shutting down"}\n'
    '{"time":"2026-11-30T19:46:19.457862093Z","level":"INFO","msg":"server: listener closed","addr":{"Name":"/t'
    'mp/wandb-6970-6975-1896645694/socket","Net":"unix"}}\n'
    '{"time":"2026-11-30T19:46:19.457879519Z","level":"INFO","msg":"server: all connections closed"}\n'
)

WANDB_STDOUT = (
    'wandb: Tracking run with wandb version 0.31.0\n'
    'wandb: W&B syncing is set to `offline` in this directory. Run `wandb online` or set WANDB_MODE=online to e'
    'nable cloud syncing.\n'
    'wandb: Run data is saved locally in /tmp/wb/wandb/offline-run-20261130_194618-mct90mee\n'
    'wandb: View this run in the terminal with `wandb leet`\n'
    'wandb: \n'
    'wandb: Run history:\n'
    'wandb: a ▁\n'
    'wandb: \n'
    'wandb: Run summary:\n'
    'wandb: a 1\n'
    'wandb: \n'
    'wandb: You can sync this run to the cloud by running:\n'
    'wandb: wandb sync /tmp/wb/wandb/offline-run-20261130_194618-mct90mee\n'
    'wandb: Find logs at: ./wb/wandb/offline-run-20261130_194618-mct90mee/logs\n'
)

REQUIREMENTS = (
    'hf-xet==1.8.0\n'
    'typer==0.29.2\n'
    'googleapis-common-protos==1.76.0\n'
    'opentelemetry-exporter-otlp-proto-http==1.45.2\n'
    'urllib3==2.8.0\n'
    'tensorboard==2.21.0\n'
    'tokenizers==0.23.3\n'
    'httpx2==2.16.2\n'
    'pydantic_core==2.50.5\n'
    'absl-py==2.5.1\n'
    'rich==15.0.0\n'
    'pydantic==2.14.4\n'
    'requests==2.34.2\n'
    'httpcore==1.0.9\n'
    'annotated-types==0.8.0\n'
)


# the DeepSpeed launcher (deepspeedai/DeepSpeed issue #3299): key=value pairs, a step-like argument
DEEPSPEED_LAUNCHER = """\
[2023-04-19 10:49:12,862] [WARNING] [runner.py:190:fetch_hostfile] Unable to find hostfile, will proceed with \
training with local resources only.
[2023-04-19 10:49:12,872] [INFO] [runner.py:540:main] cmd = /home/ubuntu/anaconda3/envs/DeepSpeed/bin/python -u -m \
deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 --master_port=29500 \
--enable_each_rank_log=None main.py --model_name_or_path facebook/opt-1.3b --gradient_accumulation_steps 2 \
--lora_dim 128 --zero_stage 0 --deepspeed --output_dir /home/ubuntu/Project/DeepSpeedExamples/applications/\
DeepSpeed-Chat/output/actor-models/1.3b
[2023-04-19 10:49:15,093] [INFO] [launch.py:229:main] WORLD INFO DICT: {'localhost': [0]}
[2023-04-19 10:49:15,093] [INFO] [launch.py:235:main] nnodes=1, num_local_procs=1, node_rank=0
[2023-04-19 10:49:15,093] [INFO] [launch.py:246:main] global_rank_mapping=defaultdict(<class 'list'>, \
{'localhost': [0]})

[2023-04-19 10:49:15,093] [INFO] [launch.py:247:main] dist_world_size=1
[2023-04-19 10:49:15,093] [INFO] [launch.py:249:main] Setting CUDA_VISIBLE_DEVICES=0
"""

# DeepSpeed's timers and vLLM's sleep mode, repeated (huggingface/trl issue #4086): "step: 105.42" is a time
DEEPSPEED_TIMERS = """\
INFO 09-15 14:42:21 [executor_base.py:188] It took 1.460260 seconds to fall asleep.
INFO 09-15 14:42:36 [gpu_worker.py:115] Sleep mode freed 51.57 GiB memory, 67.88 GiB memory is still in use.
INFO 09-15 14:42:36 [executor_base.py:188] It took 1.503160 seconds to fall asleep.
INFO 09-15 14:42:48 [gpu_worker.py:115] Sleep mode freed 51.57 GiB memory, 77.17 GiB memory is still in use.
INFO 09-15 14:42:48 [executor_base.py:188] It took 1.600564 seconds to fall asleep.
[2025-09-15 14:48:06,446] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | optimizer_allgather: 32.02 | \
optimizer_gradients: 14.23 | optimizer_step: 45.45
[2025-09-15 14:48:06,449] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd_microstep: 114578.15 | \
bwd_microstep: 117430.47 | bwd_inner_microstep: 117137.45 | bwd_allreduce_microstep: 286.56 | step_microstep: 105.41
[2025-09-15 14:48:06,452] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd: 114577.10 | bwd: 117430.12 | \
bwd_inner: 117138.34 | bwd_allreduce: 286.16 | step: 105.42
"""

# a README quoting a training log (the walkinglabs page's text): documentation, whatever it quotes
README_QUOTING_A_LOG = """\
When observing the console output during training, you will notice the training script continuously prints
various metrics. The excerpt below is taken from a real training log:
------------------------------------------------------------
  Iteration  1/20 | Episodes:  98 | Mean Reward:   20.8 | KL: 0.0047 | clip%: 6.2%
  Iteration  7/20 | Episodes:  10 | Mean Reward:  196.5 | KL: 0.0027 | clip%: 6.0%
  Iteration 13/20 | Episodes:   4 | Mean Reward:  410.0 | KL: 0.0075 | clip%: 10.6%
------------------------------------------------------------
"""

NOISE = {
    "pip.log": PIP_DRY_RUN,
    "launch.out": ACCELERATE_LAUNCH,
    "stderr.txt": TRACEBACK,
    "debug.log": WANDB_DEBUG,
    "debug-internal.log": WANDB_DEBUG_INTERNAL,
    "debug-core.log": WANDB_DEBUG_CORE,
    "wandb_stdout.log": WANDB_STDOUT,
    "deps.txt": REQUIREMENTS,
    "deepspeed_launch.log": DEEPSPEED_LAUNCHER,
    "timers.log": DEEPSPEED_TIMERS,
}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")

    return str(path)



@pytest.mark.parametrize("name", sorted(NOISE))

def test_program_output_is_not_a_metric_log(tmp_path, name):
    path = write(tmp_path, name, NOISE[name])

    assert not textlog.can_load(path) and loader_for(path) is None


@pytest.mark.parametrize("name", ["README", "README.txt", "requirements.txt", "requirements-dev.txt", "LICENSE"])

def test_documentation_and_package_lists_by_name(tmp_path, name):
    text = README_QUOTING_A_LOG if name.startswith("README") else REQUIREMENTS
    assert not textlog.can_load(write(tmp_path, name, text))



def test_the_same_quote_in_a_log_file_is_read(tmp_path):
    # the README's excerpt is a training log once it is in a file of its own
    assert textlog.can_load(write(tmp_path, "ppo.log", README_QUOTING_A_LOG))



def test_noise_only_directory_says_no_metric_logs(tmp_path):
    for name, text in NOISE.items():
        write(tmp_path, name, text)

    with pytest.raises(InputError, match="no metric logs"):
        stabdiag.load(str(tmp_path))



@pytest.mark.slow
def test_live_wandb_debug_logs_are_not_metric_logs(tmp_path):
    pytest.importorskip("wandb")

    code = ("import wandb; r = wandb.init(project='x', dir=%r); r.log({'loss': 1.0, 'reward': 0.5}); "
            "r.log({'loss': 0.9, 'reward': 0.6}); r.finish()" % str(tmp_path))

    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    if proc.returncode != 0:
        pytest.skip(f"wandb could not start offline: {proc.stderr[-200:]}")

    logs = glob.glob(str(tmp_path / "wandb" / "*" / "logs" / "debug*.log"))

    assert logs
    for path in logs + glob.glob(str(tmp_path / "wandb" / "*" / "files" / "requirements.txt")):
        assert not textlog.can_load(path), path
