/**
 * Small fake `vllm` packages for the unit tests of components/scripts/vllm-args-check.sh: each has
 * the module layout of a real vLLM release where the check reaches into it (module names, the
 * functions and classes it calls, vLLM's messages), and nothing else. The real wheels (10 GB each)
 * cannot run in the unit tests; what they answered is recorded in the check's commit and comment.
 *
 * - `0.17.1`: the CLI in vllm.entrypoints.cli, the serve flags and their validation in
 *   vllm.entrypoints.openai.cli_args, validate_api_server_args in vllm.entrypoints.openai.api_server
 *   (whose setup_server loads the parser plugins), Ray a dependency, `--swap-space` a flag,
 *   `--disable-log-requests` none.
 * - `0.33` (0.33.0 and 0.34.0): flags, validation, validate_api_server_args and init_parser_plugin
 *   in vllm.entrypoints.common.cli_args; vllm.entrypoints.openai.api_server a deprecated shim of it
 *   (`shim: false` is the day it goes); `--data-parallel-multi-port-external-lb`; no `--swap-space`;
 *   `--disable-log-requests` the inverse of `--enable-log-requests`; Ray no dependency.
 */
import * as fs from "fs";
import * as path from "path";

export type FakeLayout = "0.17.1" | "0.33";

export interface FakeVllmOptions {
    /** The version in the dist-info (default: 0.17.1, or 0.33.0 for the 0.33 layout). */
    readonly version?: string;
    /** Ray installed beside vLLM, with its version (default: 2.53.0 with 0.17.1, none with 0.33). */
    readonly ray?: string | false;
    /** Whether vllm.entrypoints.openai.api_server is still there (0.33 layout; default true). */
    readonly shim?: boolean;
}

/**
 * vllm/utils/argparse_utils.py: FlexibleArgumentParser takes `--snake_case` for `--snake-case`; from
 * 0.33 its boolean flags pair `--enable-x` with `--disable-x` (EnableDisableAction), which is how
 * 0.33 and 0.34 take `--disable-log-requests` that 0.17.1 refuses.
 */
function argparseUtils(layout: FakeLayout): string {
    const enableDisable =
        layout === "0.17.1"
            ? ""
            : `

class EnableDisableAction(BooleanOptionalAction):
    def __init__(self, option_strings, dest, *args, **kwargs):
        inverses = ["--disable-" + opt.removeprefix("--enable-") for opt in option_strings if opt.startswith("--enable-")]
        super().__init__(option_strings, dest, *args, **kwargs)
        self.negative_option_strings = {opt for opt in self.option_strings if opt.startswith("--no-")} | set(inverses)
        self.option_strings = [*self.option_strings, *inverses]

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negative_option_strings)
`;
    const register = layout === "0.17.1" ? "" : `
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", BooleanOptionalAction, EnableDisableAction)
`;
    return `import sys
from argparse import ArgumentParser, BooleanOptionalAction
${enableDisable}

class FlexibleArgumentParser(ArgumentParser):${register}
    def parse_args(self, args=None, namespace=None):
        if args is None:
            args = sys.argv[1:]
        return super().parse_args([dashed(arg) for arg in args], namespace)


def dashed(arg):
    if not arg.startswith("--"):
        return arg
    name, equals, value = arg.partition("=")
    return name.replace("_", "-") + equals + value
`;
}

/**
 * vllm/platforms + vllm/config/device.py: without a device, building the serve parser fails as vLLM's
 * does (DeviceConfig's default, "auto", finds no platform). The fake's device: FAKE_VLLM_DEVICE
 * (default cuda, empty: none).
 */
const DEVICE = `import os


class DeviceConfig:
    def __init__(self, device="auto"):
        self.device_type = os.environ.get("FAKE_VLLM_DEVICE", "cuda")
        if not self.device_type:
            raise RuntimeError(
                "Failed to infer device type, please set the environment variable "
                "\`VLLM_LOGGING_LEVEL=DEBUG\` to turn on verbose logging to help debug the issue."
            )
`;

/** A parser manager (vllm/reasoning, vllm/tool_parsers) with vLLM's registry, lookups and messages. */
function manager(cls: string, kind: string, get: string, names: readonly string[], notFound: string, importName: string, importBody: string): string {
    return `import logging
import os

from vllm.utils.import_utils import import_from_path, import_plugin


class ${cls}:
    ${kind}: dict = {}
    lazy_parsers: dict = {name: ("vllm.fake", "Parser") for name in ${JSON.stringify(names)}}

    @classmethod
    def ${get}(cls, name):
        if name in cls.${kind}:
            return cls.${kind}[name]
        if name in cls.lazy_parsers:
            return object
        ${notFound}

    @classmethod
    def list_registered(cls):
        return sorted(set(cls.${kind}) | set(cls.lazy_parsers))

    @classmethod
    def register_module(cls, name):
        def register(module):
            cls.${kind}[name] = module
            return module

        return register

    @classmethod
    def ${importName}(cls, plugin_path):
${importBody}
`;
}

/** vllm/utils/import_utils.py: a plugin by file path (0.17.1), or by module name, else path (0.33). */
const IMPORT_UTILS = `import importlib
import importlib.util
import logging
import os
import sys

logger = logging.getLogger("vllm.utils.import_utils")


def import_from_path(module_name, file_path):
    spec = importlib.util.spec_from_file_location(module_name, file_path)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {module_name!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def import_plugin(plugin_path):
    try:
        return importlib.import_module(plugin_path)
    except ModuleNotFoundError:
        module_name = os.path.splitext(os.path.basename(plugin_path))[0]
        try:
            return import_from_path(module_name, plugin_path)
        except Exception:
            logger.exception("Failed to load module '%s' from %s.", module_name, plugin_path)
            return None
`;

/** 0.17.1's import of a plugin file: by path, a failure logged (vLLM then refuses the name). */
const IMPORT_BY_PATH = `        module_name = os.path.splitext(os.path.basename(plugin_path))[0]
        try:
            import_from_path(module_name, plugin_path)
        except Exception:
            logging.getLogger("vllm").exception("Failed to load module '%s' from %s.", module_name, plugin_path)`;

/** vllm/v1/executor/ray_utils.py: the import of Ray and vLLM's assert_ray_available (same in all three). */
const RAY_UTILS = `try:
    import ray

    ray_import_err = None
except ImportError as e:
    ray = None
    ray_import_err = str(e)


def assert_ray_available():
    """Raise an exception if Ray is not available."""
    if ray is None:
        raise ValueError(f"Failed to import Ray: {ray_import_err}." "Please install Ray with \`pip install ray\`.")
`;

/** The serve flags the checks read, as each layout has them (model_tag first). */
function makeArgParser(layout: FakeLayout): string {
    const perLayout =
        layout === "0.17.1"
            ? `    parser.add_argument("--swap-space", type=float, default=4)`
            : `    parser.add_argument("--data-parallel-multi-port-external-lb", action="store_true", default=False)`;
    return `import argparse
import json


def make_arg_parser(parser):
    from vllm.config.device import DeviceConfig

    DeviceConfig()
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true", default=False)
    parser.add_argument("--api-server-count", "-asc", type=int, default=None)
    for flag in ("--served-model-name", "--host", "--master-addr", "--reasoning-parser", "--tool-call-parser", "--chat-template"):
        parser.add_argument(flag, default=None)
    for flag in ("--tool-parser-plugin", "--reasoning-parser-plugin"):
        parser.add_argument(flag, default="")
    for flag in ("--port", "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--nnodes", "--node-rank", "--master-port"):
        parser.add_argument(flag, type=int, default=None)
    parser.add_argument("--data-parallel-rank", "-dpn", type=int, default=None)
    parser.add_argument("--data-parallel-start-rank", "-dpr", type=int, default=None)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--allowed-origins", type=json.loads, default=${layout === "0.17.1" ? '["*"]' : "[]"})
    parser.add_argument("--middleware", action="append", default=[])
    parser.add_argument("--distributed-executor-backend", choices=["ray", "mp", "uni", "external_launcher"], default=None)
    for flag in ("--enable-auto-tool-choice", "--trust-remote-code", "--data-parallel-external-lb", "--data-parallel-hybrid-lb", "--enable-log-outputs"):
        parser.add_argument(flag, action="store_true", default=False)
    parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--structured-outputs-config", default=StructuredOutputsConfig())
${perLayout}
    return parser


class StructuredOutputsConfig:
    reasoning_parser = ""


def validate_parsed_serve_args(args):
    """Quick checks for model serve args that raise prior to loading."""
    if hasattr(args, "subparser") and args.subparser != "serve":
        return
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
    if args.enable_log_outputs and not args.enable_log_requests:
        raise TypeError("Error: --enable-log-outputs requires --enable-log-requests")
`;
}

/** validate_api_server_args, the same code in both layouts (only its module moved). */
const VALIDATE_API_SERVER_ARGS = `def validate_api_server_args(args):
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    valid_tool_parses = ToolParserManager.list_registered()
    if args.enable_auto_tool_choice and args.tool_call_parser not in valid_tool_parses:
        raise KeyError(
            f"invalid tool call parser: {args.tool_call_parser} "
            f"(chose from {{ {','.join(valid_tool_parses)} }})"
        )
    valid_reasoning_parsers = ReasoningParserManager.list_registered()
    if (reasoning_parser := args.structured_outputs_config.reasoning_parser) and reasoning_parser not in valid_reasoning_parsers:
        raise KeyError(
            f"invalid reasoning parser: {reasoning_parser} "
            f"(chose from {{ {','.join(valid_reasoning_parsers)} }})"
        )
`;

/** vllm/entrypoints/cli/serve.py: ServeSubcommand; its cmd starts the server, which a fake cannot. */
function serve(layout: FakeLayout): string {
    const cliArgs = layout === "0.17.1" ? "vllm.entrypoints.openai.cli_args" : "vllm.entrypoints.common.cli_args";
    return `import sys

from ${cliArgs} import make_arg_parser, validate_parsed_serve_args


class ServeSubcommand:
    name = "serve"

    @staticmethod
    def cmd(args):
        sys.exit("the fake vLLM cannot start a server: the check let vllm serve's command run")

    def validate(self, args):
        validate_parsed_serve_args(args)

    def subparser_init(self, subparsers):
        return make_arg_parser(subparsers.add_parser(self.name, usage="vllm serve [model_tag] [options]"))


def cmd_init():
    return [ServeSubcommand()]
`;
}

/** vllm/entrypoints/cli/main.py: vLLM's main(), binding `dispatch_function=cmd.cmd` as it builds the parser. */
const CLI_MAIN = `import importlib.metadata


def main():
    import vllm.entrypoints.cli.serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=importlib.metadata.version("vllm"))
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd in vllm.entrypoints.cli.serve.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        cmds[cmd.name] = cmd
    args = parser.parse_args()
    if args.subparser in cmds:
        cmds[args.subparser].validate(args)
    if hasattr(args, "dispatch_function"):
        args.dispatch_function(args)
    else:
        parser.print_help()
`;

/** Reasoning and tool-call parsers registered in both layouts, among them spark-duo's (qwen3, qwen3_coder). */
const REASONING_PARSERS = ["deepseek_r1", "glm45", "qwen3"];
const TOOL_PARSERS = ["hermes", "qwen3_coder", "qwen3_xml"];

/** The files of a fake vLLM (and Ray) of `layout`, by path under a PYTHONPATH entry. */
export function fakeVllmFiles(layout: FakeLayout, options: FakeVllmOptions = {}): Record<string, string> {
    const version = options.version ?? (layout === "0.17.1" ? "0.17.1" : "0.33.0");
    const ray = options.ray ?? (layout === "0.17.1" ? "2.53.0" : false);
    const reasoningImport = layout === "0.17.1" ? IMPORT_BY_PATH : "        import_plugin(plugin_path)";
    const toolImport = layout === "0.17.1" ? IMPORT_BY_PATH : "        import_plugin(plugin_path)";
    const files: Record<string, string> = {
        [`vllm-${version}.dist-info/METADATA`]: `Metadata-Version: 2.1\nName: vllm\nVersion: ${version}\n`,
        "vllm/__init__.py": "",
        "vllm/config/__init__.py": "",
        "vllm/config/device.py": DEVICE,
        "vllm/utils/__init__.py": "",
        "vllm/utils/argparse_utils.py": argparseUtils(layout),
        "vllm/utils/import_utils.py": IMPORT_UTILS,
        "vllm/reasoning/__init__.py": manager(
            "ReasoningParserManager",
            "reasoning_parsers",
            "get_reasoning_parser",
            REASONING_PARSERS,
            `registered = ", ".join(cls.list_registered())
        raise KeyError(f"Reasoning parser '{name}' not found. Available parsers: {registered}")`,
            "import_reasoning_parser",
            reasoningImport,
        ),
        "vllm/tool_parsers/__init__.py": manager("ToolParserManager", "tool_parsers", "get_tool_parser", TOOL_PARSERS, `raise KeyError(f"Tool parser '{name}' not found.")`, "import_tool_parser", toolImport),
        "vllm/v1/__init__.py": "",
        "vllm/v1/executor/__init__.py": "",
        "vllm/v1/executor/ray_utils.py": RAY_UTILS,
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/cli/__init__.py": "",
        "vllm/entrypoints/cli/main.py": CLI_MAIN,
        "vllm/entrypoints/cli/serve.py": serve(layout),
        "vllm/entrypoints/openai/__init__.py": "",
    };
    if (layout === "0.17.1") {
        files["vllm/entrypoints/openai/cli_args.py"] = makeArgParser(layout);
        files["vllm/entrypoints/openai/api_server.py"] = VALIDATE_API_SERVER_ARGS;
    } else {
        files["vllm/entrypoints/common/__init__.py"] = "";
        files["vllm/entrypoints/common/cli_args.py"] =
            makeArgParser(layout) +
            `

def init_parser_plugin(args):
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    if args.tool_parser_plugin and len(args.tool_parser_plugin) > 3:
        ToolParserManager.import_tool_parser(args.tool_parser_plugin)
    if args.reasoning_parser_plugin and len(args.reasoning_parser_plugin) > 3:
        ReasoningParserManager.import_reasoning_parser(args.reasoning_parser_plugin)


` +
            VALIDATE_API_SERVER_ARGS;
        if (options.shim ?? true) {
            files["vllm/entrypoints/openai/api_server.py"] = `import warnings

from vllm.entrypoints.common.cli_args import validate_api_server_args

warnings.warn(
    "\`vllm.entrypoints.openai.api_server\` is deprecated and will likely be"
    "unsupported in a future version. Use the corresponding function from "
    "\`vllm.entrypoints.launchers\` instead.",
    DeprecationWarning,
    stacklevel=1,
)
`;
        }
    }
    if (ray) {
        files[`ray-${ray}.dist-info/METADATA`] = `Metadata-Version: 2.1\nName: ray\nVersion: ${ray}\n`;
        files["ray/__init__.py"] = `__version__ = "${ray}"\n`;
    }
    return files;
}

/** Writes a fake vLLM of `layout` under `dir` (a PYTHONPATH entry). */
export function writeFakeVllm(dir: string, layout: FakeLayout, options: FakeVllmOptions = {}): void {
    for (const [file, text] of Object.entries(fakeVllmFiles(layout, options))) {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), text);
    }
}
