# STAND-IN: vllm/entrypoints/utils.py of vLLM 0.17.1 (vllm-fleet proving ground): the CLI's
# environment setup, the subcommand epilog and the "non-default args" log line.
import os

from vllm.logger import init_logger

logger = init_logger(__name__)

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
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    defaults = vars(make_arg_parser(FlexibleArgumentParser()).parse_args([]))
    non_default = {k: v for k, v in vars(args).items() if k in defaults and defaults[k] != v}
    logger.info("non-default args: %s", non_default, line=238)
