# STAND-IN: vllm/utils/argparse_utils.py of vLLM 0.17.1 (vllm-fleet proving ground); with the 0.33
# layout (vllm/version.py) its boolean flags pair `--enable-x` with `--disable-x` (EnableDisableAction).
#
# FlexibleArgumentParser is an argparse.ArgumentParser, so argparse's own errors come out exactly
# as real vLLM's do (e.g. "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
# then "vllm: error: unrecognized arguments: --bogus", exit 2). What vLLM adds is modeled here:
#  - `--snake_case` names become `--kebab-case` (only the part before the first "." and "=");
#  - `vllm serve ... --model M` moves M to the positional model (with vLLM's warning), and
#    `--served-model-name` without a positional model is a ValueError;
#  - `-O3` / `-O=3` / `-O 3` mean `--optimization-level 3`;
#  - dotted JSON arguments (`--compilation-config.mode 3`, `--x.key+ a,b`) are merged into one
#    JSON argument each;
#  - `--config file.yaml` inserts the file's keys as flags (CLI > config > defaults);
#  - `--help` of a subcommand prints its config groups; `--help=<group|flag|all>` searches.
# Simpler than real: no "deprecated" flag warnings (vLLM 0.17.1's serve has none that the
# program uses), help text of single flags is not kept.
import argparse
import json
import re
import sys

from vllm.logger import init_logger

logger = init_logger(__name__)

_JSON_TIP = (
    "When passing JSON CLI arguments, the following sets of arguments "
    "are equivalent:\n"
    '   --json-arg \'{"key1": "value1", "key2": {"key3": "value2"}}\'\n'
    "   --json-arg.key1 value1 --json-arg.key2.key3 value2\n\n"
    "Additionally, list elements can be passed individually using +:\n"
    '   --json-arg \'{"key4": ["value3", "value4", "value5"]}\'\n'
    "   --json-arg.key4+ value3 --json-arg.key4+='value4,value5'\n\n"
)


class SortedHelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Lists arguments sorted by their option strings."""

    def add_arguments(self, actions):
        super().add_arguments(sorted(actions, key=lambda a: a.option_strings))


def _dashes(name: str) -> str:
    """`--a_b.c_d` -> `--a-b.c_d`: underscores become dashes up to the first '.'."""
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _nest(keys, value):
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(into: dict, update: dict, path: str, duplicates: set) -> None:
    for key, value in update.items():
        here = f"{path}.{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, here, duplicates)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] += value
        else:
            if key in into:
                duplicates.add(here)
            into[key] = value


class EnableDisableAction(argparse.BooleanOptionalAction):
    """vLLM 0.33 and 0.34: `BooleanOptionalAction` that pairs `--enable-x` with `--disable-x` (and
    `--disable-x` with `--enable-x`); `--no-enable-x`, `--no-disable-x` are still accepted. This is
    how they take `--disable-log-requests`, which 0.17.1 refuses."""

    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

    def __init__(self, option_strings, dest, *args, **kwargs):
        super().__init__(option_strings, dest, *args, **kwargs)
        inverses = [inverse + opt[len(prefix):] for opt in option_strings
                    for prefix, inverse in self._inverse_prefixes.items() if opt.startswith(prefix)]
        self.negative_option_strings = {opt for opt in self.option_strings if opt not in option_strings} | set(inverses)
        self.option_strings = [*self.option_strings, *inverses]

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negative_option_strings)


class FlexibleArgumentParser(argparse.ArgumentParser):
    """ArgumentParser that allows both underscore and dash in names."""

    _search_keyword = None

    def __init__(self, *args, **kwargs):
        from vllm.version import LAYOUT

        kwargs.setdefault("formatter_class", SortedHelpFormatter)
        self.add_json_tip = kwargs.pop("add_json_tip", True)
        super().__init__(*args, **kwargs)
        if LAYOUT != "0.17.1":
            self.register("action", argparse.BooleanOptionalAction, EnableDisableAction)

    def format_help(self):
        if self._subparsers is not None:
            return super().format_help()
        formatter = self._get_formatter()
        keyword = FlexibleArgumentParser._search_keyword
        if keyword is not None:
            keyword = keyword.lower().replace("_", "-")
            if keyword == "all":
                self.epilog = _JSON_TIP
                return super().format_help()
            for group in self._action_groups:
                if group.title and group.title.lower() == keyword:
                    formatter.start_section(group.title)
                    formatter.add_text(group.description)
                    formatter.add_arguments(group._group_actions)  # noqa: SLF001
                    formatter.end_section()
                    formatter.add_text(_JSON_TIP)
                    return formatter.format_help()
            matched = [a for g in self._action_groups for a in g._group_actions  # noqa: SLF001
                       if any(keyword in opt.lower() for opt in a.option_strings)]
            if matched:
                formatter.start_section(f"Arguments matching '{keyword}'")
                formatter.add_arguments(matched)
                formatter.end_section()
                formatter.add_text(_JSON_TIP)
                return formatter.format_help()
            formatter.add_text(f"No group or arguments matching '{keyword}'.\n"
                               "Use '--help' to see available groups or "
                               "'--help=all' to see all available parameters.")
            return formatter.format_help()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        formatter.start_section("Config Groups")
        groups = "".join(f"{g.title: <24}{g.description or ''}\n"
                         for g in self._action_groups if g._group_actions)  # noqa: SLF001
        formatter.add_text(groups)
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()

    def parse_args(self, args=None, namespace=None):  # noqa: C901 - one pass per vLLM rule
        args = list(sys.argv[1:] if args is None else args)

        if args and args[0] == "serve":
            model_at = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
            if model_at is not None:
                logger.warning(
                    "With `vllm serve`, you should provide the model as a positional argument or "
                    "in a config file instead of via the `--model` option. The `--model` option "
                    "will be removed in v0.13.", line=193)
                if args[model_at] == "--model":
                    model, rest = args[model_at + 1], model_at + 2
                else:
                    model, rest = args[model_at][len("--model="):], model_at + 1
                args = ["serve", model, *args[1:model_at], *args[rest:]]
            if (len(args) > 1 and args[1].startswith("-")
                    and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                    and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
                raise ValueError("`model` should be provided as the first positional argument when "
                                 "using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")

        if "--config" in args:
            args = self._pull_args_from_config(args)

        processed = []
        for i, arg in enumerate(args):
            if arg.startswith("--help="):
                FlexibleArgumentParser._search_keyword = arg.split("=", 1)[-1].lower()
                processed.append("--help")
            elif arg.startswith("--"):
                key, eq, value = arg.partition("=")
                processed.append(_dashes(key) + eq + value)
            elif arg.startswith("-O") and arg != "-O":
                processed += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
            elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
                processed.append("--optimization-level")
            else:
                processed.append(arg)

        # Dotted JSON arguments: merged per top-level name, appended as one JSON argument each.
        skip, dict_args, duplicates, seen = set(), {}, set(), set()
        for i, arg in enumerate(processed):
            if i in skip:
                continue
            if arg.startswith("--") and "." not in arg:
                name = arg.split("=", 1)[0]
                (duplicates if name in seen else seen).add(name)
                continue
            if arg.startswith("-") and "." in arg:
                if "=" in arg:
                    arg, value = arg.split("=", 1)
                    if "." not in arg:
                        continue  # the '.' was in the value only
                else:
                    value = processed[i + 1] if i + 1 < len(processed) else ""
                    skip.add(i + 1)
                if arg.endswith("+"):
                    arg = arg[:-1]
                    value = json.dumps(value.split(","))
                key, *keys = arg.split(".")
                try:
                    parsed = json.loads(value)
                except json.JSONDecodeError:
                    parsed = value
                _merge(dict_args.setdefault(key, {}), _nest(keys, parsed), key, duplicates)
                skip.add(i)
        processed = [a for i, a in enumerate(processed) if i not in skip]
        if duplicates:
            logger.warning("Found duplicate keys %s", ", ".join(sorted(duplicates)), line=353)
        for key, value in dict_args.items():
            processed += [key, json.dumps(value)]
        return super().parse_args(processed, namespace)

    def _pull_args_from_config(self, args):
        assert args.count("--config") <= 1, "More than one config file specified!"
        index = args.index("--config")
        if index == len(args) - 1:
            raise ValueError("No config file specified! Please check your command-line arguments.")
        config_args = self.load_config_file(args[index + 1])
        if args[0].startswith("-"):
            return config_args + args[:index] + args[index + 2:]
        if args[0] == "serve":
            model_in_cli = len(args) > 1 and not args[1].startswith("-")
            if not model_in_cli and "--model" not in config_args:
                raise ValueError("No model specified! Please specify model either "
                                 "as a positional argument or in a config file.")
            if model_in_cli:
                return args[:2] + config_args + args[2:index] + args[index + 2:]
        return [args[0]] + config_args + args[1:index] + args[index + 2:]

    def load_config_file(self, file_path: str):
        extension = file_path.split(".")[-1]
        if extension not in ("yaml", "yml"):
            raise ValueError(f"Config file must be of a yaml/yml type. {extension} supplied")
        import yaml  # the workload image has PyYAML (a dependency of Ray), as vLLM's has

        try:
            with open(file_path, encoding="utf-8") as f:
                config = yaml.safe_load(f)
        except Exception:
            logger.error("Unable to read the config file at %s. Check path correctness", file_path, line=497)
            raise
        out = []
        for key, value in config.items():
            if isinstance(value, bool):
                if value:
                    out.append("--" + key)
            elif isinstance(value, list):
                if value:
                    out += ["--" + key, *(str(v) for v in value)]
            elif isinstance(value, dict):
                out += ["--" + key, json.dumps(value)]
            else:
                out += ["--" + key, str(value)]
        return out
