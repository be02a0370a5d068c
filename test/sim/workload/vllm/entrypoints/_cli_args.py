# STAND-IN: `vllm serve`'s flags and their validation (vllm-fleet proving ground): vLLM 0.17.1's
# vllm/entrypoints/openai/cli_args.py, 0.33's and 0.34's vllm/entrypoints/common/cli_args.py (each
# re-exports this module in its layout).
#
# make_arg_parser builds `vllm serve`'s arguments like vLLM 0.17.1: the positional model_tag,
# --headless, --api-server-count/-asc, --config, the frontend flags (FRONTEND_FLAGS, dumped from
# vLLM 0.17.1's parser, see vllm/engine/arg_utils.py) and the engine flags.
# validate_parsed_serve_args makes exactly vLLM 0.17.1's checks, which do NOT look at parser
# names: an unknown --reasoning-parser or --tool-call-parser passes here, as in real vLLM (see
# vllm/entrypoints/openai/api_server.py for where vLLM refuses them).
import argparse
import os

from vllm.engine.arg_utils import AsyncEngineArgs, add_flags

FRONTEND_FLAGS = [
    ('--lora-modules', 'lora', 'optional:str', None, None, 'Frontend'),
    ('--chat-template', 'store', 'optional:str', None, None, 'Frontend'),
    ('--chat-template-content-format', 'store', 'str', 'auto', ['auto', 'openai', 'string'], 'Frontend'),
    ('--trust-request-chat-template --no-trust-request-chat-template', 'bool', '', False, None, 'Frontend'),
    ('--default-chat-template-kwargs', 'store', 'loads', None, None, 'Frontend'),
    ('--response-role', 'store', 'str', 'assistant', None, 'Frontend'),
    ('--return-tokens-as-token-ids --no-return-tokens-as-token-ids', 'bool', '', False, None, 'Frontend'),
    ('--disable-frontend-multiprocessing --no-disable-frontend-multiprocessing', 'bool', '', False, None, 'Frontend'),
    ('--enable-auto-tool-choice --no-enable-auto-tool-choice', 'bool', '', False, None, 'Frontend'),
    ('--exclude-tools-when-tool-choice-none --no-exclude-tools-when-tool-choice-none', 'bool', '', False, None, 'Frontend'),
    ('--tool-call-parser', 'store', 'optional:str', None, None, 'Frontend'),
    ('--tool-parser-plugin', 'store', 'str', '', None, 'Frontend'),
    ('--tool-server', 'store', 'optional:str', None, None, 'Frontend'),
    ('--log-config-file', 'store', 'optional:str', None, None, 'Frontend'),
    ('--max-log-len', 'store', 'optional:int', None, None, 'Frontend'),
    ('--enable-prompt-tokens-details --no-enable-prompt-tokens-details', 'bool', '', False, None, 'Frontend'),
    ('--enable-server-load-tracking --no-enable-server-load-tracking', 'bool', '', False, None, 'Frontend'),
    ('--enable-force-include-usage --no-enable-force-include-usage', 'bool', '', False, None, 'Frontend'),
    ('--enable-tokenizer-info-endpoint --no-enable-tokenizer-info-endpoint', 'bool', '', False, None, 'Frontend'),
    ('--enable-log-outputs --no-enable-log-outputs', 'bool', '', False, None, 'Frontend'),
    ('--enable-log-deltas --no-enable-log-deltas', 'bool', '', True, None, 'Frontend'),
    ('--log-error-stack --no-log-error-stack', 'bool', '', False, None, 'Frontend'),
    ('--tokens-only --no-tokens-only', 'bool', '', False, None, 'Frontend'),
    ('--host', 'store', 'optional:str', None, None, 'Frontend'),
    ('--port', 'store', 'int', 8000, None, 'Frontend'),
    ('--uds', 'store', 'optional:str', None, None, 'Frontend'),
    ('--uvicorn-log-level', 'store', 'str', 'info', ['critical', 'debug', 'error', 'info', 'trace', 'warning'], 'Frontend'),
    ('--disable-uvicorn-access-log --no-disable-uvicorn-access-log', 'bool', '', False, None, 'Frontend'),
    ('--disable-access-log-for-endpoints', 'store', 'optional:str', None, None, 'Frontend'),
    ('--allow-credentials --no-allow-credentials', 'bool', '', False, None, 'Frontend'),
    ('--allowed-origins', 'store', 'loads', ['*'], None, 'Frontend'),
    ('--allowed-methods', 'store', 'loads', ['*'], None, 'Frontend'),
    ('--allowed-headers', 'store', 'loads', ['*'], None, 'Frontend'),
    ('--api-key', 'list', 'optional:str', None, None, 'Frontend'),
    ('--ssl-keyfile', 'store', 'optional:str', None, None, 'Frontend'),
    ('--ssl-certfile', 'store', 'optional:str', None, None, 'Frontend'),
    ('--ssl-ca-certs', 'store', 'optional:str', None, None, 'Frontend'),
    ('--enable-ssl-refresh --no-enable-ssl-refresh', 'bool', '', False, None, 'Frontend'),
    ('--ssl-cert-reqs', 'store', 'int', 0, None, 'Frontend'),
    ('--ssl-ciphers', 'store', 'optional:str', None, None, 'Frontend'),
    ('--root-path', 'store', 'optional:str', None, None, 'Frontend'),
    ('--middleware', 'append', 'str', [], None, 'Frontend'),
    ('--enable-request-id-headers --no-enable-request-id-headers', 'bool', '', False, None, 'Frontend'),
    ('--disable-fastapi-docs --no-disable-fastapi-docs', 'bool', '', False, None, 'Frontend'),
    ('--h11-max-incomplete-event-size', 'store', 'int', 4194304, None, 'Frontend'),
    ('--h11-max-header-count', 'store', 'int', 256, None, 'Frontend'),
    ('--enable-offline-docs --no-enable-offline-docs', 'bool', '', False, None, 'Frontend'),
    ('--use-gpu-for-pooling-score --no-use-gpu-for-pooling-score', 'bool', '', False, None, 'Frontend'),
]


def _frontend_flags():
    """The frontend flags of the release modelled (0.33 layout: 0.34.0's, vllm/engine/_flags_v033.py);
    --tool-call-parser shows the built-in parsers in its metavar, as vLLM's."""
    from vllm.tool_parsers import ToolParserManager
    from vllm.version import LAYOUT

    metavar = "{" + ",".join(ToolParserManager.list_registered()) + "} or name registered in --tool-parser-plugin"
    if LAYOUT == "0.17.1":
        return metavar, FRONTEND_FLAGS
    from vllm.engine._flags_v033 import FRONTEND_FLAGS as FLAGS_V033, NOT_IN_0_33_0

    return metavar, [f for f in FLAGS_V033 if f[0].split()[0] not in NOT_IN_0_33_0]


def make_arg_parser(parser):
    from vllm.version import LAYOUT, RELEASE

    parser.add_argument("model_tag", type=str, nargs="?",
                        help="The model tag to serve (optional if specified in config)")
    parser.add_argument("--headless", action="store_true", default=False,
                        help="Run in headless mode. See multi-node data parallel documentation for more details.")
    if RELEASE == "0.34.0":
        parser.add_argument("--headless-client-handshake-address", type=str, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--api-server-count", "-asc", type=int, default=None,
                        help="How many API server processes to run. Defaults to data_parallel_size if not specified.")
    parser.add_argument("--config", help="Read CLI options from a config file. Must be a YAML with the "
                        "following options: https://docs.vllm.ai/en/latest/configuration/serve_args.html")
    if LAYOUT != "0.17.1":
        parser.add_argument("--grpc", action="store_true", default=False,
                            help="Launch the Python gRPC (SMG VllmEngine) server on --port instead of the HTTP "
                            "OpenAI-compatible server.")
    metavar, flags = _frontend_flags()
    add_flags(parser, flags)
    for action in parser._actions:  # noqa: SLF001
        if "--tool-call-parser" in action.option_strings:
            action.metavar = metavar
    return AsyncEngineArgs.add_cli_args(parser)


# Chat templates that ship with vLLM 0.17.1 (vllm/transformers_utils/chat_templates/).
BUILTIN_CHAT_TEMPLATES = (
    "template_basic.jinja", "template_blip2.jinja", "template_chatml.jinja", "template_deepseek_ocr.jinja",
    "template_deepseek_vl2.jinja", "template_fuyu.jinja", "template_minicpmv45.jinja",
)
CHAT_TEMPLATES_DIR = "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/chat_templates"


def validate_chat_template(chat_template) -> None:
    """vllm.entrypoints.chat_utils.validate_chat_template."""
    if chat_template is None:
        return
    if isinstance(chat_template, str):
        if not any(c in chat_template for c in "{}\n") and not os.path.exists(chat_template):
            builtin = os.path.join(CHAT_TEMPLATES_DIR, chat_template)
            if chat_template not in BUILTIN_CHAT_TEMPLATES:
                raise ValueError(f"The supplied chat template string ({chat_template}) appears path-like, "
                                 f"but doesn't exist! Tried: {chat_template} and {builtin}")


def validate_parsed_serve_args(args) -> None:
    """Quick checks for model serve args that raise prior to loading."""
    from vllm.version import LAYOUT

    if hasattr(args, "subparser") and args.subparser not in (("serve",) if LAYOUT == "0.17.1" else ("serve", "launch")):
        return
    validate_chat_template(args.chat_template)
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
    if args.enable_log_outputs and not args.enable_log_requests:
        raise TypeError("Error: --enable-log-outputs requires --enable-log-requests")
    if LAYOUT == "0.17.1":
        return
    # vLLM 0.33 and 0.34 also check these (simpler: not --grpc-port, --reasoning-effort-map and the
    # multi-port load balancing mode's arguments).
    if getattr(args, "sse_keep_alive_interval", 0) < 0:
        raise ValueError("Error: --sse-keep-alive-interval must be a non-negative integer "
                         "(0 disables keep-alive comments).")
    if getattr(args, "enable_per_request_metrics", False) and getattr(args, "disable_log_stats", False):
        raise ValueError("Error: --enable-per-request-metrics requires engine statistics logging; remove "
                         "--disable-log-stats to enable per-request metrics.")
