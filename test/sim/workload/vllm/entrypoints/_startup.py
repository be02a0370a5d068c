# STAND-IN: the CLI's environment setup, the subcommand epilog and the "non-default args" log line
# (vllm-fleet proving ground): vLLM 0.17.1's vllm/entrypoints/utils.py, 0.33's and 0.34's
# vllm/entrypoints/common/startup.py (each re-exports this module in its layout).
import os

from vllm.logger import init_logger
from vllm.version import LAYOUT

# Named as the module each release logs from ("[utils.py:238]", "[startup.py:...]").
logger = init_logger("vllm.entrypoints.utils" if LAYOUT == "0.17.1" else "vllm.entrypoints.common.startup")

VLLM_SUBCMD_PARSER_EPILOG = (
    "For full list:            vllm {subcmd} --help=all\n"
    "For a section:            vllm {subcmd} --help=ModelConfig    (case-insensitive)\n"
    "For a flag:               vllm {subcmd} --help=max-model-len  (_ or - accepted)\n"
    "Documentation:            https://docs.vllm.ai\n"
)


def cli_env_setup() -> None:
    # vLLM's CLI makes `spawn` the multiprocessing method of its workers unless set.
    if "VLLM_WORKER_MULTIPROC_METHOD" not in os.environ:
        logger.debug("Setting VLLM_WORKER_MULTIPROC_METHOD to 'spawn'", line=180)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"


def log_non_default_args(args) -> None:
    from vllm.entrypoints._cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    defaults = vars(make_arg_parser(FlexibleArgumentParser()).parse_args([]))
    non_default = {k: v for k, v in vars(args).items() if k in defaults and defaults[k] != v}
    logger.info("non-default args: %s", non_default, line=238)
